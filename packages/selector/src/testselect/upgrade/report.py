"""The human report of `testselect upgrade`: counts first (changed vs total), then names, then the config diff."""

from __future__ import annotations

from typing import Any

from testselect.upgrade.cases import ONE


def _shown(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _names(names: list[str], limit: int = 8) -> str:
    return f" ({_shown(names, limit)})" if names else ""


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
    added, removed, modified = tests["added"], tests["removed"], tests["modified"]
    lines = [
        f"tree {report['from']} -> {report['to']}",
        f"tests: {len(added) + len(modified)} of {len(added) + len(modified) + tests['unchanged']} in NEW added or "
        f"modified ({len(added)} added, {len(modified)} modified), {len(removed)} of "
        f"{len(removed) + len(modified) + tests['unchanged']} in OLD removed, {tests['unchanged']} unchanged; "
        f"stale recorded cases: {report['stale_cases']}",
    ]
    for kind, names in (("added", added), ("removed", removed), ("modified", modified)):
        if names:
            lines.append(f"  {kind}: {_shown(names)}")
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
