"""The sleeve built with AWS-LC's AES-256-GCM (overlay/sleeve/aws-lc.sh, `make aws-lc`):
local builds link it when it is there, OVERLAYBENCH_AWSLC chooses, and a sleeve sealing
with AWS-LC talks to one built on OpenSSL alone (the same cipher, the same wire)."""

from __future__ import annotations

import subprocess

import pytest
from test_sleeve_lab import _iperf, cpu_has_fast_aes

from conftest import needs_root
from harness.core.errors import HarnessError
from harness.modes.sleeve import SleeveCrypto
from harness.run.endpoints import endpoints
from harness.sleeve import build as sleeve_build


@pytest.fixture(scope="module")
def awslc():
    """The AWS-LC build `make setup` made (make test runs setup first)."""
    d = sleeve_build.awslc_dir()
    if d is None:
        pytest.fail(f"no AWS-LC build in {sleeve_build.cache_dir() / 'aws-lc'}: run make aws-lc")
    return d


def _version(binary) -> str:
    return subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout


def test_a_local_build_links_aws_lc_when_it_is_there_and_not_when_off(awslc, tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_CACHE", str(tmp_path))      # fresh builds, not the shared cache
    monkeypatch.setenv("OVERLAYBENCH_AWSLC", str(awslc))
    with_lc = sleeve_build.build_local()
    monkeypatch.setenv("OVERLAYBENCH_AWSLC", "off")
    without = sleeve_build.build_local()
    assert with_lc != without and with_lc.parent.parent.name.endswith("-awslc-" + (awslc / "VERSION").read_text().strip())
    assert "aes-256-gcm-from=aws-lc" in _version(with_lc)
    assert "aes-256-gcm-from" not in _version(without) and "openssl=3" in _version(without)


def test_an_aws_lc_dir_that_is_not_one_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_AWSLC", str(tmp_path / "nothing"))
    with pytest.raises(HarnessError, match="no AWS-LC build there.*aws-lc.sh"):
        sleeve_build.build_local()


class MixedBuilds(SleeveCrypto):
    """sleeve-crypto whose h1 runs a build on OpenSSL alone."""

    name = "sleeve-crypto-mixed"
    openssl_only = None

    def _start(self, testbed, s, binary, mtu, key):
        if s.index == 1:
            binary = f"{s.workdir}/sleeve-openssl-only"
            s.host.put(str(self.openssl_only), binary, 0o755)
        return super()._start(testbed, s, binary, mtu, key)


@needs_root()
@pytest.mark.lab
@pytest.mark.skipif(not cpu_has_fast_aes(), reason="AES-256-GCM is picked only where the CPU has AES-NI")
def test_aws_lc_and_openssl_builds_agree_on_aes_256_gcm_and_carry_tcp(lab, awslc, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_AWSLC", "off")
    MixedBuilds.openssl_only = sleeve_build.build_local()
    monkeypatch.setenv("OVERLAYBENCH_AWSLC", str(awslc))
    mode = MixedBuilds()
    dp = mode.deploy(lab, 1410)
    try:
        assert dp.info["cipher"] == "aes-256-gcm", dp.info
        h0, h1 = dp.info["cipher_impl"]
        assert h0.startswith("AWS-LC ") and h1.startswith("OpenSSL 3"), dp.info["cipher_impl"]
        assert _iperf(lab, dp, "container-container") > 0
        c, s = endpoints(lab, dp, "container-container")
        assert c.host.run(["ping", "-c", "2", "-W", "10", s.addr], check=False).returncode == 0
        for side, snap in mode.counters(lab, dp).items():
            assert snap["rx"]["frames"] > 0 and snap["drops"]["auth_fail"] == 0, (side, snap["drops"])
    finally:
        mode.teardown(lab, dp)
