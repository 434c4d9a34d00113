"""An upstream test file that looks for credentials, run as one leg of a distributed run under `crcr callback run`
in a job whose runner can mint OIDC tokens: the leg reports to the real local relay, and the test, on the ring
device through testreuse, sees no `ACTIONS_*`, token-like or `CRCR_*` variable, nor the host's PYTHONPATH,
PYTEST_ADDOPTS or device fault switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crcr import oidc
from crcr.ci import legs, runner
from crcr.ci.model import BuildResult, Prepared, RunRecord
from crcr.relay.server import running_relay
from embedded import COMBINATION, config_folder

HOSTILE = """
import json, os
from pathlib import Path

from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests

WANTED = ("ACTIONS_", "CRCR_", "GITHUB_TOKEN", "GH_TOKEN")
HOST_ONLY = ("PYTHONPATH", "PYTEST_ADDOPTS", "RINGSIM_FAULT")


def _credentials(names):
    return sorted(n for n in names if n.startswith(WANTED) or "TOKEN" in n.upper() or n in HOST_ONLY)


class TestHostile(TestCase):
    def test_looks_for_credentials(self, device):
        found = _credentials(os.environ)
        Path(__file__).with_name("hostile-saw.json").write_text(json.dumps(found))
        self.assertEqual(found, [])


instantiate_device_type_tests(TestHostile, globals())

if __name__ == "__main__":
    run_tests()
"""
CONFIG = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_hostile.py
      unlisted_test_mode: skip
      tests:
        - names: [TestHostile::test_looks_for_credentials]
          mode: mandatory_success
"""
LEG = """
import sys
from pathlib import Path

from crcr.ci import legs, pipeline
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.runner import Suite

prepared, out, configs, tree = map(Path, sys.argv[1:])
profile = DeviceProfile("dev", "ring", (), {"upstream": str(configs)})
ctx = pipeline.Context(out.parent, out.parent / "cache", CIConfig("dev", ("2.13.0",), str(tree)), profile)
suite = Suite(Path(sys.executable), configs, tree, "ring")
sys.exit(1 if legs.run_leg(ctx, prepared, "primary", 1, out, suite_of=lambda _c, _p: suite) else 0)
"""


def test_a_hostile_upstream_test_in_a_reporting_leg_sees_no_credential(tmp_path: Path) -> None:
    tree = tmp_path / "pytorch"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_hostile.py").write_text(HOSTILE)
    configs = config_folder(tmp_path / "configs")
    (configs / "test_hostile.yaml").write_text(CONFIG)
    suite = runner.Suite(Path(sys.executable), configs, tree, "ring")
    prepared = tmp_path / "prepared"
    collected = runner.collect(suite, prepared / "collect")
    assert collected.selected
    plan = runner.plan_shards(
        suite, collected.selected, prepared / "durations.json", "ring/embedded", "primary", runner.Planning(1), prepared
    )
    (prepared / "builds" / "b").mkdir(parents=True)
    (prepared / "builds" / "b" / "build.log").write_text("")
    item = Prepared(COMBINATION, BuildResult(True, {}, {}, log="builds/b/build.log"), collected.modes, plan)
    record = RunRecord("20261204T000000Z-hostile", "2026-12-04T00:00:00+00:00", {}, {}, "dev")
    legs.write_prepared(prepared, record, [item], [], ["primary"])
    script = tmp_path / "leg.py"
    script.write_text(LEG)
    with running_relay(tmp_path / "relay.db") as relay:
        payload = tmp_path / "client_payload.json"
        payload.write_text(json.dumps(relay.dispatch("push", {"ref": "refs/heads/main", "after": "e" * 40})))
        env = {k: v for k, v in os.environ.items() if k != oidc.DEFAULT_ENV}
        env |= {
            oidc.REQUEST_URL: relay.issuer.token_request_url,
            oidc.REQUEST_TOKEN: relay.issuer.request_token,
            "ACTIONS_RUNTIME_TOKEN": "runtime-secret",
            "GITHUB_TOKEN": "ghs_host_secret",
            "CRCR_CALLBACK_URL": relay.callback_url,
            "GITHUB_REPOSITORY": relay.issuer.repository,
            "GITHUB_WORKFLOW": "downstream",
            "GITHUB_RUN_ID": "5",
            "GITHUB_JOB": "shard",
            "RUNNER_TEMP": str(tmp_path / "runner-temp"),
            "PYTHONPATH": str(Path(__file__).parent),  # the leg script's helpers; never the shards'
            "PYTEST_ADDOPTS": "-p no:randomly",
            "RINGSIM_FAULT": "transient@1000000",
        }
        leg = tmp_path / "leg"
        command = [str(Path(sys.executable).parent / "crcr"), "callback", "run", "--payload", str(payload), "--",
                   sys.executable, str(script), str(prepared), str(leg), str(configs), str(tree)]  # fmt: skip
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
        jobs = relay.jobs()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tree / "test" / "hostile-saw.json").read_text()) == []
    (test,) = json.loads((leg / legs.LEG).read_text())["tests"]
    assert test["outcome"] == "passed"
    assert [(j["status"], j["conclusion"]) for j in jobs] == [("COMPLETED", "success")]
