"""What upstream test code is handed: the allow-list, the profile's names, never a credential, and a profile that
asks for one is a one-line error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.ci.ciconfig import CIConfigError, load_profile
from crcr.ci.shardenv import shard_environment
from crcr.credentials import is_credential, without_relay_credentials

HOST = {
    "PATH": "/usr/bin",
    "HOME": "/home/ci",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example/id?x=1",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-secret",
    "ACTIONS_RUNTIME_TOKEN": "runtime-secret",
    "GITHUB_TOKEN": "ghs_secret",
    "GH_TOKEN": "ghs_secret2",
    "CRCR_TOKEN": "relay-secret",
    "CRCR_CALLBACK_URL": "https://relay.example/github/callback/",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "PYTHONPATH": "/host/site",
    "PYTEST_ADDOPTS": "-p host_plugin",
    "RINGSIM_FAULT": "abort@1",
    "RING_INDUCTOR_DUMP": "1",
    "RING_API_TOKEN": "device-secret",
}


def test_a_shard_gets_the_base_set_the_profiles_names_and_what_the_pipeline_sets() -> None:
    env = shard_environment(HOST, ("RING_INDUCTOR_*", "RING_*"), {"PYTHONPATH": "/backend", "X": "1"})
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/ci",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "RING_INDUCTOR_DUMP": "1",  # named by the profile
        "PYTHONPATH": "/backend",  # the pipeline's own, not the host's
        "X": "1",
    }  # the fault switch, PYTEST_ADDOPTS and every credential stay out, even RING_API_TOKEN that RING_* matches


def test_a_wildcard_profile_still_passes_no_credential() -> None:
    env = shard_environment(HOST, ("*",))
    assert not [name for name in env if is_credential(name)]
    assert "PYTEST_ADDOPTS" in env  # what the profile asked for, and nothing that is a credential


@pytest.mark.parametrize(
    "name", ["ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GITHUB_TOKEN", "CRCR_TOKEN", "CRCR_CALLBACK_URL", "MY_API_KEY"]
)
def test_credential_names(name: str) -> None:
    assert is_credential(name)


def test_the_relay_credentials_leave_a_wrapped_command_and_the_rest_stays() -> None:
    env = without_relay_credentials(HOST, ["RING_API_TOKEN"])
    assert not {n for n in env if n.startswith(("ACTIONS_", "CRCR_"))}
    assert "RING_API_TOKEN" not in env
    assert env["GITHUB_TOKEN"] == "ghs_secret"  # not the relay's: a command may need it (the shards never get it)


def test_a_profile_that_passes_a_credential_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / "dev.yaml").write_text(
        "device: dev\nconfigs: {embedded: c}\nenvironment: [RING_INDUCTOR_DUMP, GITHUB_TOKEN]\n"
    )
    with pytest.raises(CIConfigError, match=r"dev\.yaml:3: environment\[1\]: 'GITHUB_TOKEN' looks like a credential"):
        load_profile(tmp_path, "dev")
    (tmp_path / "devices" / "dev.yaml").write_text("device: dev\nconfigs: {embedded: c}\nenvironment: RING_X\n")
    with pytest.raises(CIConfigError, match=r"environment: expected a list of strings"):
        load_profile(tmp_path, "dev")
