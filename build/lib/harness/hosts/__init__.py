"""Where commands run: one transport per module behind the Host base class."""

from harness.hosts.base import Completed, Host, Process
from harness.hosts.local import LocalHost
from harness.hosts.netns import NetnsHost

__all__ = ["Completed", "Host", "Process", "LocalHost", "NetnsHost"]
