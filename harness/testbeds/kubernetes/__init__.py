"""The kubernetes backend: an existing cluster's nodes measured through pods.

    open_testbed(scenario, options)   the modes and the node plan checked (native and cni
                                      only; selector, zones, one node), the API reached,
                                      the nodes picked: nothing made yet
    remove_leftovers(options, …)      `overlaybench down --kubeconfig`: the run namespaces
                                      whose owner is gone

The API comes from `connect` (harness/hosts/kube/api.py): the one place the kubernetes
client is loaded, and where tests put a fake API instead.
"""

from __future__ import annotations

import logging
import socket
import time

from harness.bed import Options
from harness.hosts.kube import api as api_mod
from harness.hosts.local import owner_alive
from harness.testbeds.kubernetes import nodes as nodes_mod, specs
from harness.testbeds.kubernetes.backend import KubeTestbed
from harness.testbeds.kubernetes.plan import node_plan, pod_settings, refuse_modes, refuse_same_node, tool_ports

log = logging.getLogger(__name__)


def connect(opts: Options):
    """The API for the options' kubeconfig and context (tests replace this)."""
    return api_mod.connect(opts.kubeconfig, opts.kube_context)


def open_testbed(sc, opts: Options) -> KubeTestbed:
    refuse_modes(sc)                    # before the API is even reached
    settings = pod_settings(opts)       # and bad flags
    wanted = tuple(opts.nodes) or tuple(sc.pair)    # --nodes, else the scenario's [testbed] pair
    plan = node_plan(opts, wanted)
    if plan.same_node:
        refuse_same_node(sc)
    if opts.port_base is not None:
        tool_ports(opts, 1)             # a base out of range, before the API is reached
    api = connect(opts)
    version = api.server_version()
    picked = nodes_mod.pick(api.list_nodes(), wanted, opts.node_count, settings.tolerations, plan.selector,
                            plan.across_zones, plan.same_node)
    return KubeTestbed(api, picked, opts, server=version, settings=settings)


def why_kept(labels: dict, created: float | None = None, older_than: float | None = None) -> str | None:
    """Why a run's objects with these labels stay without --force; None: its owner is gone
    (or, another machine's, they are older than `older_than` seconds: --older-than)."""
    host, pid = labels.get(specs.OWNER_HOST, ""), labels.get(specs.OWNER_PID, "")
    ns = labels.get(specs.OWNER_PIDNS, "")
    if host != specs.label_value(socket.gethostname()):
        if older_than is not None and created is not None and time.time() - created > older_than:
            return None
        return f"owned by {host or 'an unknown machine'}, which this machine cannot check" + \
            ("" if older_than is not None else "; --older-than AGE removes it once that old")
    if pid.isdigit() and owner_alive(int(pid), int(ns) if ns.isdigit() else None):
        return f"owned by running pid {pid}"
    return None


# what a run makes in a namespace it did not make: its pull secrets it uses where they are
# (the Role of docs/kubernetes.md lets it get them, not list them)
KINDS = ("pods", "services")


def remove_leftovers(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """Delete the run namespaces (labelled managed-by overlaybench) whose owner is gone; with
    --namespace, the runs' labelled objects in that namespace instead (never the namespace)."""
    api = connect(opts)
    if opts.kube_namespace:
        return _remove_in(api, opts.kube_namespace, force, opts.older_than)
    removed, kept = [], []
    for ns in api.list_namespaces(specs.SELECTOR):
        why = None if force else why_kept(ns["labels"], ns.get("created"), opts.older_than)
        if why:
            kept.append(f"namespace {ns['name']} ({why})")
            continue
        api.delete_namespace(ns["name"])
        removed.append(f"namespace {ns['name']} (run {ns['labels'].get(specs.RUN, '?')})")
    return removed, kept


def _remove_in(api, namespace: str, force: bool, older_than: float | None) -> tuple[list[str], list[str]]:
    """The labelled objects of dead runs in an existing namespace, by run."""
    runs: dict[str, list[tuple[str, dict]]] = {}
    for kind in KINDS:
        for obj in api.list_objects(kind, namespace, specs.SELECTOR):
            runs.setdefault(obj["labels"].get(specs.PREFIX, "?"), []).append((kind, obj))
    removed, kept = [], []
    for prefix, objs in sorted(runs.items()):
        labels = objs[0][1]["labels"]
        names = ", ".join(f"{kind[:-1]} {o['name']}" for kind, o in objs)
        created = min((o["created"] for _k, o in objs if o.get("created") is not None), default=None)
        why = None if force else why_kept(labels, created, older_than)
        if why:
            kept.append(f"in namespace {namespace}: {names} ({why})")
            continue
        for kind, o in objs:
            api.delete_object(kind, namespace, o["name"])
        removed.append(f"in namespace {namespace}: {names} (run {labels.get(specs.RUN, '?')})")
    return removed, kept
