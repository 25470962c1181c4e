"""The kubernetes backend: an existing cluster's nodes measured through pods.

    open_testbed(scenario, options)   the modes checked (native and cni only), the API
                                      reached, the nodes picked: nothing made yet
    remove_leftovers(options, …)      `overlaybench down --kubeconfig`: the run namespaces
                                      whose owner is gone

The API comes from `connect` (harness/hosts/kube/api.py): the one place the kubernetes
client is loaded, and where tests put a fake API instead.
"""

from __future__ import annotations

import logging
import socket

from harness.bed import Options
from harness.hosts.kube import api as api_mod
from harness.hosts.local import owner_alive
from harness.testbeds.kubernetes import nodes as nodes_mod, specs
from harness.testbeds.kubernetes.backend import KubeTestbed, refuse_modes

log = logging.getLogger(__name__)


def connect(opts: Options):
    """The API for the options' kubeconfig and context (tests replace this)."""
    return api_mod.connect(opts.kubeconfig, opts.kube_context)


def open_testbed(sc, opts: Options) -> KubeTestbed:
    refuse_modes(sc)                    # before the API is even reached
    api = connect(opts)
    version = api.server_version()
    # --nodes, else the scenario's [testbed] pair (node names, or "all")
    picked = nodes_mod.pick(api.list_nodes(), tuple(opts.nodes) or tuple(sc.pair), opts.node_count)
    return KubeTestbed(api, picked, opts, server=version)


def why_kept(labels: dict) -> str | None:
    """Why a run namespace with these labels stays without --force; None: its owner is gone."""
    host, pid = labels.get(specs.OWNER_HOST, ""), labels.get(specs.OWNER_PID, "")
    ns = labels.get(specs.OWNER_PIDNS, "")
    if host != specs.label_value(socket.gethostname()):
        return f"owned by {host or 'an unknown machine'}, which this machine cannot check"
    if pid.isdigit() and owner_alive(int(pid), int(ns) if ns.isdigit() else None):
        return f"owned by running pid {pid}"
    return None


def remove_leftovers(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """Delete the run namespaces (labelled managed-by overlaybench) whose owner is gone."""
    api = connect(opts)
    removed, kept = [], []
    for ns in api.list_namespaces(specs.SELECTOR):
        why = None if force else why_kept(ns["labels"])
        if why:
            kept.append(f"namespace {ns['name']} ({why})")
            continue
        api.delete_namespace(ns["name"])
        removed.append(f"namespace {ns['name']} (run {ns['labels'].get(specs.RUN, '?')})")
    return removed, kept
