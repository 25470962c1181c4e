"""Where commands run: one transport per module behind the Host base class.

The SSH transport (harness.hosts.ssh: SshHost in .host, SshSettings in .connect) is imported where it is used:
paramiko takes ~140 ms to import, which `overlaybench --help` should not pay. So is the
Kubernetes one (harness.hosts.kube: the API seam in .api, PodHost in .pod), whose client
is imported only when a cluster is reached.
"""

from harness.hosts.base import Completed, Host, Process
from harness.hosts.local import LocalHost
from harness.hosts.netns import NetnsHost

__all__ = ["Completed", "Host", "Process", "LocalHost", "NetnsHost"]
