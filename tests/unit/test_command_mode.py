"""Modes defined by commands (harness/modes/commands.py), without root: the definition as a
scenario gives it, a value that cannot become shell syntax, bad input as one line and
exit 2, and modes that Python packages add through entry points.

Every test runs on a copy of the registry: a scenario read here defines its modes in the
copy, and the checkout's MODES is as it was afterwards."""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys
import textwrap

import pytest

from harness import modes
from harness.core.errors import HarnessError, ScenarioError
from harness.hosts.local import LocalHost
from harness.modes import commands
from harness.run import scenario as S

ROOT = pathlib.Path(__file__).resolve().parents[2]
UP = ("ip link add ${dev} type vxlan id 77 dstport 4790 local ${underlay_ip} remote ${peer_underlay_ip} "
      "dev ${underlay_dev} nolearning")


def definition(**kw) -> dict:
    d = {"layer": "l2", "overhead": 50, "device": "vx77", "up": [UP], "down": ["ip link del ${dev}"]}
    d.update(kw)
    return {k: v for k, v in d.items() if v is not None}


def scenario(name="vx77", matrix=None, **kw) -> dict:
    return {"modes": {name: definition(**kw)}, "matrix": {"modes": [name], "repeats": 1, **(matrix or {})}}


def refused(raw: dict, source: str = "s.toml") -> str:
    with pytest.raises(ScenarioError) as e:
        S.expand(S.build(raw, source=source))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ------------------------------------------------------------------ the definition

def test_a_scenario_defines_a_mode_its_matrix_measures():
    sc = S.build(scenario(), source="s.toml")
    mode = sc.mode("vx77")
    assert isinstance(mode, commands.CommandMode)
    assert (mode.kind, mode.layer, mode.overhead, mode.source) == ("vx77", "l2", 50, "s.toml")
    assert {(c.mode, c.overlay_mtu) for c in S.expand(sc)} == {("vx77", 1450)}
    assert sc.mode_defs == ({"name": "vx77", "source": "s.toml", "definition": definition()},)


def test_a_resumed_run_defines_its_modes_again_from_run_json():
    kept = S.build(scenario(), source="s.toml").to_dict()
    assert "registry" not in kept
    again = S.Scenario.from_dict(kept)
    assert again.modes == ("vx77",) and again.mode("vx77").definition == definition()
    assert "vx77" not in modes.standard()                   # the run's, nobody else's


def test_mode_files_are_read_relative_to_the_scenario(tmp_path):
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "byo.toml").write_text(
        '[modes.vx77]\nlayer = "l2"\noverhead = 50\ndevice = "vx77"\n'
        f'up = [{UP!r}]\ndown = ["ip link del ${{dev}}"]\n'.replace("'", '"'))
    s = tmp_path / "s.toml"
    s.write_text('[scenario]\nname = "x"\nmode_files = ["defs/byo.toml"]\n[matrix]\nmodes = ["vx77"]\n')
    sc = S.load(s)
    assert sc.mode_files == ("defs/byo.toml",)
    assert sc.mode("vx77").source == str(tmp_path / "defs" / "byo.toml")


def test_a_mode_file_holds_only_mode_tables(tmp_path):
    (tmp_path / "byo.toml").write_text('[matrix]\nrepeats = 1\n')
    s = tmp_path / "s.toml"
    s.write_text('[scenario]\nmode_files = ["byo.toml"]\n')
    with pytest.raises(ScenarioError, match=r"byo.toml: \[matrix\]: a mode file holds \[modes.NAME\] tables"):
        S.load(s)


@pytest.mark.parametrize("kw, needle", [
    ({"down": None}, "s.toml: [modes.vx77]: no `down`: a mode defined by commands must say how to remove"),
    ({"up": ["ip link add ${devv} type dummy"]},
     "s.toml: [modes.vx77] up #1: unknown variable ${devv} (did you mean 'dev'?)"),
    ({"down": ["ip link del ${dev}", ["ip", "addr", "flush", "${bridgee}"]]},
     "s.toml: [modes.vx77] down #2: unknown variable ${bridgee}"),
    ({"up": ["ip link add ${dev"]}, "s.toml: [modes.vx77] up #1: `${` without a closing `}`"),
    ({"up": ["sh -c 'ip link add ${dev} type dummy'"]},
     "s.toml: [modes.vx77] up #1: ${dev} inside a shell's script would become code"),
    ({"up": ["ip netns exec x env A=1 bash -euc 'echo ${workdir}'"]}, "${workdir} inside a shell's script"),
    ({"up": ["ip 'link"]}, "s.toml: [modes.vx77] up #1: \"ip 'link\": No closing quotation"),
    ({"up": []}, "s.toml: [modes.vx77] up: must not be empty"),
    ({"up": [""]}, "up #1: an empty command"),
    ({"layer": "l4"}, "s.toml: [modes.vx77] layer: 'l4': expected \"l2\" or \"l3\""),
    ({"device": "vxlan-seventy"}, "s.toml: [modes.vx77] device: 'vxlan-seventy': a letter, then up to 7"),
    ({"overhead": -1}, "s.toml: [modes.vx77] overhead: -1 bytes is outside 0..64959"),
    ({"features": ["vxlna"]}, "s.toml: [modes.vx77] features: unknown kernel feature 'vxlna' (did you mean 'vxlan'?)"),
    ({"features": [["vxlan"]]}, "s.toml: [modes.vx77] features: [['vxlan']]: expected a list of names"),
    ({"colour": "#fff"}, "s.toml: [modes.vx77] colour: unknown key"),
    ({"layer": None}, "s.toml: [modes.vx77]: no `layer` (needs layer, overhead, device, up, down)"),
], ids=["no-down", "unknown-variable", "unknown-variable-in-an-argv", "unclosed", "variable-in-sh-c",
        "variable-in-a-wrapped-shell", "bad-quoting", "no-up", "empty-command", "layer", "device-too-long",
        "negative-overhead", "unknown-feature", "features-not-names", "unknown-key", "no-layer"])
def test_a_bad_definition_is_one_line_naming_file_mode_and_key(kw, needle):
    assert needle in refused(scenario(**kw))
    assert "vx77" not in modes.standard(), "a scenario refused defines nothing"


def test_an_overhead_that_leaves_no_room_in_the_mtu_is_refused_before_anything_runs():
    msg = refused(scenario(overhead=1000, matrix={"underlay_mtu": [1500, 9000]}))
    assert msg == ("s.toml: [matrix] overlay_mtu: mode vx77 (s.toml): its overhead of 1000 bytes leaves 500 "
                   "of underlay MTU 1500, below 576")
    assert {c.overlay_mtu for c in S.expand(S.build(scenario("big", overhead=1000, matrix={"underlay_mtu": [9000]})))} \
        == {8000}


@pytest.mark.parametrize("name, needle", [
    ("fastdp", "s.toml: [modes.fastdp]: mode fastdp: the name is taken by a built-in mode"),
    ("Vx", "s.toml: [modes.Vx]: a mode's name is a lowercase letter"),
    ("sleeve@base", "a mode's name is a lowercase letter"),
])
def test_a_name_that_is_taken_or_malformed_is_refused(name, needle):
    assert needle in refused(scenario(name))
    assert modes.get("fastdp").__class__.__name__ == "FastDP"


def test_two_definitions_of_one_name_clash_and_the_same_one_twice_does_not():
    """Within one scenario (a file, then the flags over it): the same definition again is
    the same mode, another is refused. Another scenario's definition is its own."""
    a = S.build(scenario(), source="a.toml")
    S.build(scenario(), source="a.toml", base=a)
    with pytest.raises(ScenarioError) as e:
        S.build(scenario(overhead=60), source="b.toml", base=a)
    assert str(e.value) == "b.toml: [modes.vx77]: mode vx77: the name is taken by the mode of a.toml"
    assert S.build(scenario(overhead=60), source="b.toml").mode("vx77").overhead == 60


def test_the_shipped_example_measures_its_vxlan_beside_fastdp():
    sc = S.load(ROOT / "scenarios" / "bring-your-own.toml")
    mode = sc.mode("vxlan77")
    assert sc.modes == ("native", "fastdp", "vxlan77") and mode.features == ("vxlan",)
    groups = {(c.mode, c.overlay_mtu) for c in S.expand(sc)}
    assert groups == {("native", 1500), ("fastdp", 1450), ("vxlan77", 1450)}
    words = [commands.expand(w, {**dict.fromkeys(commands.VARIABLES, "V"), "dev": "vx77"}) for w in mode.up]
    assert words[0][:9] == ["ip", "link", "add", "vx77", "type", "vxlan", "id", "77", "dstport"] and "4790" in words[0]


# ------------------------------------------------------------------ values stay values

HOSTILE = ["x; touch {d}/pwned", "$(touch {d}/pwned)", "`touch {d}/pwned`", "'; touch {d}/pwned; '",
           "\"; touch {d}/pwned; \"", "a\ntouch {d}/pwned", "* {d}/*", "$HOME ${{dev}} $$", "-n", ""]


@pytest.mark.parametrize("template", [
    "printf %s|%s| ${workdir} pre${workdir}post",
    ["printf", "%s|%s|", "${workdir}", "pre${workdir}post"],
    "sh -c 'printf \"%s|%s|\" \"$1\" \"$2\"' sh ${workdir} pre${workdir}post",
], ids=["string", "array", "as-a-shells-arguments"])
@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_cannot_become_shell_syntax(tmp_path, template, value):
    """The value reaches the program as the very bytes it holds, one argument however it is
    spelt, on this machine (argv straight to exec) and as the SSH transport sends it (each
    word quoted, read by a shell on the far end); nothing it spells runs."""
    value = value.format(d=tmp_path)
    words = commands.parse_command(template, "up #1")
    argv = commands.expand(words, {**dict.fromkeys(commands.VARIABLES, "?"), "workdir": value})
    assert argv[-2:] == [value, f"pre{value}post"]
    want = f"{value}|pre{value}post|"
    assert LocalHost("here").run(argv).stdout == want
    over_ssh = subprocess.run(["sh", "-c", shlex.join(argv)], capture_output=True, text=True, cwd=tmp_path)
    assert (over_ssh.returncode, over_ssh.stdout) == (0, want)
    assert not (tmp_path / "pwned").exists()


def test_a_dollar_is_literal_unless_it_opens_a_variable():
    words = commands.parse_command("sh -c 'echo $1 $$ $$$$' sh $$${dev}$x", "up #1")
    assert commands.expand(words, {"dev": "D"}) == ["sh", "-c", "echo $1 $ $$", "sh", "$D$x"]


# ------------------------------------------------------------------ bad input, as a user gives it

BAD = {
    "no-down": ('[modes.byo]\nlayer = "l2"\noverhead = 50\ndevice = "vx77"\nup = ["ip link add ${dev} type dummy"]\n',
                "[modes.byo]: no `down`"),
    "unknown-variable": ('[modes.byo]\nlayer = "l2"\noverhead = 50\ndevice = "vx77"\n'
                         'up = ["ip link add ${device} type dummy"]\ndown = ["ip link del ${dev}"]\n',
                         "[modes.byo] up #1: unknown variable ${device}"),
    "no-room": ('[modes.byo]\nlayer = "l2"\noverhead = 1000\ndevice = "vx77"\n'
                'up = ["ip link add ${dev} type dummy"]\ndown = ["ip link del ${dev}"]\n',
                "mode byo (", "its overhead of 1000 bytes leaves 500 of underlay MTU 1500, below 576"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_is_made(tmp_path, case):
    text, *needles = BAD[case]
    f = tmp_path / "s.toml"
    f.write_text(text + '[matrix]\nmodes = ["native", "byo"]\n')
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(f), "--results", str(tmp_path / "results")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith(f"overlaybench: {f}: ") or lines[0].startswith(f"{f}: "), lines[0]
    assert all(n in lines[0] for n in needles), lines[0]
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------------------ plugins

PLUGIN = textwrap.dedent('''
    from harness.modes.base import Datapath, Mode
    from harness.modes.commands import CommandMode


    class Plugged(Mode):
        name = "plugged"
        kind = "plugged"
        order = 7
        overhead = 12
        description = "a mode from an installed package"

        def deploy(self, testbed, overlay_mtu):
            return Datapath(self.name, self.kind, overlay_mtu)

        def teardown(self, testbed, dp):
            pass


    def by_commands():
        return [CommandMode(f"plug{v}", {"layer": "l2", "overhead": 50, "device": f"vx{v}",
                                         "up": [f"ip link add ${{dev}} type vxlan id {v} dstport 4790"],
                                         "down": ["ip link del ${dev}"]}, "obplug")
                for v in (1, 2)]


    class Clash(Plugged):
        name = "fastdp"


    def broken():
        raise RuntimeError("no licence")
''')


def _site(tmp_path: pathlib.Path, entry_points: str) -> pathlib.Path:
    site = tmp_path / "site"
    (site / "obplug").mkdir(parents=True)
    (site / "obplug" / "__init__.py").write_text(PLUGIN)
    dist = site / "obplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: obplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[overlaybench.modes]\n" + entry_points)
    return site


def _modes_cli(site: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]))
    return subprocess.run([sys.executable, "-m", "harness.cli", "modes"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_an_installed_package_adds_modes_through_its_entry_points(tmp_path):
    p = _modes_cli(_site(tmp_path, "plugged = obplug:Plugged\npair = obplug:by_commands\n"))
    assert p.returncode == 0, p.stderr
    names = [ln.split()[0] for ln in p.stdout.splitlines()]
    assert names.index("native") < names.index("plugged") < names.index("fastdp"), names   # its own order, 7
    assert names[-2:] == ["plug1", "plug2"], names
    assert "plugged                12 B  a mode from an installed package" in p.stdout.replace("  ", "  ")


@pytest.mark.parametrize("entry, needle", [
    ("fastdp = obplug:Clash", "entry point fastdp = obplug:Clash (overlaybench.modes): mode fastdp: "
                              "the name is taken by a built-in mode"),
    ("gone = obplug:broken", "entry point gone = obplug:broken (overlaybench.modes): cannot load: "
                             "RuntimeError: no licence"),
    ("typo = obplug:Nothing", "entry point typo = obplug:Nothing (overlaybench.modes): cannot load: AttributeError"),
    ("text = obplug:__name__", "entry point text = obplug:__name__ (overlaybench.modes): gave 'obplug', not a Mode"),
])
def test_a_plugin_that_clashes_or_fails_is_one_line_naming_its_entry_point(tmp_path, entry, needle):
    p = _modes_cli(_site(tmp_path, entry + "\n"))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert needle in lines[0], lines[0]


def test_define_refuses_a_mode_without_a_name():
    class Nameless(commands.CommandMode):
        pass
    m = Nameless("x", definition(), "here")
    m.name = ""
    with pytest.raises(HarnessError, match="here: a mode needs a name"):
        modes.Registry().define(m)
