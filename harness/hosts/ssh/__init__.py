"""The SSH transport on paramiko: `host` (SshHost), `connect` (settings, known_hosts,
the connection), `shell` (commands framed in long-lived `sh` channels), `process`
(background processes whose exit and output survive a reconnect).

Import the submodule you need: paramiko takes ~140 ms to import, which `overlaybench
--help` and the backends that never use SSH should not pay."""
