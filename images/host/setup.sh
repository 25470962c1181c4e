#!/bin/sh
# Runs inside the chroot of the Vagrant host image, after host/packages are installed.
# $1: a file holding Vagrant's insecure public key(s).
set -eu

# The vagrant user: Vagrant's insecure key (Vagrant swaps it for a per-machine key on
# the first `vagrant up`), passwordless sudo, no usable password ('*': key login only).
id vagrant >/dev/null 2>&1 || useradd --create-home --shell /bin/bash vagrant
usermod --password '*' vagrant
install -d -m 0700 -o vagrant -g vagrant /home/vagrant/.ssh
install -m 0600 -o vagrant -g vagrant "$1" /home/vagrant/.ssh/authorized_keys
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/vagrant
chmod 0440 /etc/sudoers.d/vagrant
visudo -c -q -f /etc/sudoers.d/vagrant

# sshd: its privilege-separation directory, and no host keys in the image: each container
# makes its own (ed25519 and ECDSA, both quick to generate) when it starts, so two hosts
# never share a key; then sshd runs in the foreground.
install -d -m 0755 /run/sshd
rm -f /etc/ssh/ssh_host_*
cat >/etc/ssh/sshd_config.d/overlaybench.conf <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
HostKey /etc/ssh/ssh_host_ecdsa_key
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
EOF
cat >/usr/local/sbin/overlaybench-sshd <<'EOF'
#!/bin/sh
set -e
for t in ed25519 ecdsa; do
    [ -f /etc/ssh/ssh_host_${t}_key ] || ssh-keygen -q -N '' -t $t -f /etc/ssh/ssh_host_${t}_key
done
exec /usr/sbin/sshd -D -e "$@"
EOF
chmod 0755 /usr/local/sbin/overlaybench-sshd
