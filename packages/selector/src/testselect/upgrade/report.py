"""The human report of `testselect upgrade`: counts first (changed vs total), then names, then the config diff."""

from __future__ import annotations

from typing import Any

from testselect.upgrade.cases import ONE


def _names(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return f" ({shown})" if names else ""


def _configs(report: dict[str, Any]) -> list[str]:
    entries, size = report["entries"], report["diff_lines"]
    return [
        f"tests re-evaluated: {report['tests_reevaluated']} of {report['tests_total']} in the files in scope",
        f"configs: {len(report['files_changed'])} files differ{_names(report['files_changed'])}; entries "
        f"{entries['before']} -> {entries['after']}; diff +{size['added']} -{size['removed']} lines",
        *report["diff"],
    ]


def tree_lines(report: dict[str, Any]) -> list[str]:
    tests = report["tests"]
    total = len(tests["added"]) + len(tests["modified"]) + tests["unchanged"]
    changed = len(tests["added"]) + len(tests["removed"]) + len(tests["modified"])
    lines = [
        f"tree {report['from']} -> {report['to']}",
        f"tests: {changed} changed of {total} in NEW: {len(tests['added'])} added{_names(tests['added'], 3)}, "
        f"{len(tests['removed'])} removed{_names(tests['removed'], 3)}, "
        f"{len(tests['modified'])} modified{_names(tests['modified'], 3)}, {tests['unchanged']} unchanged; "
        f"stale recorded cases: {report['stale_cases']}",
    ]
    return lines + _configs(report)


def core_lines(report: dict[str, Any]) -> list[str]:
    ops, modules, found = report["opinfos"], report["moduleinfos"], report["cases"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(ops["kinds"].items()))
    lines = [
        f"core torch {report['from']['torch']} (dump {report['from']['dump_seconds']} s) -> "
        f"torch {report['to']['torch']} (dump {report['to']['dump_seconds']} s)",
        f"opinfos: {len(ops['added'])} added{_names(ops['added'])}, {len(ops['removed'])} removed"
        f"{_names(ops['removed'])}, {len(ops['changed'])} changed" + (f" ({kinds})" if kinds else ""),
        f"moduleinfos: {len(modules['added'])} added{_names(modules['added'])}, {len(modules['removed'])} removed"
        f"{_names(modules['removed'])}, {len(modules['changed'])} changed{_names(sorted(modules['changed']))}",
        f"cases: {found['added'] + found['removed'] + found['changed']} changed of {found['total']}: "
        f"{found['added']} added, {found['removed']} removed, {found['changed']} changed",
    ]
    for path, c in sorted(found["per_file"].items()):
        lines.append(f"  {path}: +{c['added']} -{c['removed']} ~{c['changed']} of {c['total']}")
    for node_id, detail in sorted(found["per_test"].items()):
        lines.append(
            f"  {node_id}: +{len(detail['added'])}{_names(detail['added'], 4)} "
            f"-{len(detail['removed'])}{_names(detail['removed'], 4)} ~{detail['changed']}"
        )
    for node_id, source in sorted(report["unresolved_sources"].items()):
        lines.append(f"  not mapped: {node_id}: op list {source!r} is not one the dump has")
    for entry in report["per_op_entries"]:
        kind = "ops" if "ops" in entry else "modules"
        dtypes = "" if entry["dtype"] == ONE else f", dtypes: [{entry['dtype']}]"
        lines.append(
            f"per-op: {entry['test']}: {entry[kind]} ({entry['dtype']}) is new, with no evidence yet; its entry "
            f'would be scoped `only: {{{kind}: [{entry[kind]}]{dtypes}, torch: ">={entry["torch"]}"}}`'
        )
    return lines + _configs(report)
