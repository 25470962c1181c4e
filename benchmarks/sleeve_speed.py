"""The table of BENCHMARKS.md's "Every sleeve mode against kernel VXLAN" from one run of
scenarios/sleeve-speed.toml:

    overlaybench run scenarios/sleeve-speed.toml
    python benchmarks/sleeve_speed.py results/<run>

Per underlay MTU and mode: TCP Gbit/s median (min–max) over repeats; × fastdp, the median
of the per-repeat paired ratios (same repeat, same underlay); tcp_lat median; lat × sleeve,
the median of the per-repeat paired ratios to the plain sleeve; cpu_sleeve, the daemons'
own CPU as % of one core (median over the TCP repeats); Gbit per CPU-second, throughput
divided by the whole machine's busy cores in that repeat (median), × fastdp's.
"""

from __future__ import annotations

import json
import pathlib
import statistics as st
import sys

from harness.results import load


def main(run_dir: str) -> None:
    df = load(run_dir)
    df = df[df["ok"]]
    cores = json.loads((pathlib.Path(run_dir) / "run.json").read_text())["machine"]["cpus"]   # the run's machine
    v = df.pivot_table(index=["underlay_mtu", "overlay_mtu", "mode", "repeat"], columns=["test", "metric"],
                       values="value", aggfunc="first")
    print("| underlay / overlay | mode | TCP Gbit/s | × fastdp | tcp_lat µs | lat × sleeve | cpu_sleeve "
          "| Gbit per CPU-s (× fastdp) |")
    print("|---|---|---|---|---|---|---|---|")
    order = list(dict.fromkeys(df.sort_values("ts")["mode"]))
    for ul in sorted(df["underlay_mtu"].unique()):
        sub = v.xs(ul, level="underlay_mtu")

        def per_repeat(mode, col):
            s = sub.xs(mode, level="mode")[col].dropna()
            return dict(zip(s.index.get_level_values("repeat"), s.values))

        def ratios(mode, ref, col):
            a, b = per_repeat(mode, col), per_repeat(ref, col)
            return [a[r] / b[r] for r in a if r in b and b[r]]

        def per_cpu(mode):
            bw, cpu = per_repeat(mode, ("iperf3.tcp", "throughput_bps")), per_repeat(mode, ("iperf3.tcp", "cpu_total_pct"))
            return [bw[r] / 1e9 / (cpu[r] / 100 * cores) for r in bw if cpu.get(r)]

        fast_cpu = st.median(per_cpu("fastdp"))
        label = f"{ul} / {sub.xs('fastdp', level='mode').index.get_level_values('overlay_mtu')[0]}"
        first = True
        for mode in order:
            modes = set(sub.index.get_level_values("mode"))
            if mode not in modes:
                continue
            bw = [x / 1e9 for x in per_repeat(mode, ("iperf3.tcp", "throughput_bps")).values()]
            lat = list(per_repeat(mode, ("qperf.tcp_lat", "latency_us")).values())
            xf = st.median(ratios(mode, "fastdp", ("iperf3.tcp", "throughput_bps")))
            xs = (f"{st.median(ratios(mode, 'sleeve', ('qperf.tcp_lat', 'latency_us'))):.2f}"
                  if mode.startswith("sleeve") else "")
            cpu_s = per_repeat(mode, ("iperf3.tcp", "cpu_sleeve_pct")) if ("iperf3.tcp", "cpu_sleeve_pct") in sub.columns else {}
            cs = f"{st.median(cpu_s.values()):.0f}%" if cpu_s else "—"
            pc = st.median(per_cpu(mode))
            print(f"| {label if first else ''} | {mode} | {st.median(bw):.2f} ({min(bw):.2f}–{max(bw):.2f}) "
                  f"| {xf:.2f} | {st.median(lat):.1f} | {xs} | {cs} | {pc:.2f} ({pc / fast_cpu:.2f}) |")
            first = False


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/sleeve_speed.py RUN_DIR")
    main(sys.argv[1])
