#!/bin/sh
# Runs once inside the freshly debootstrapped rootfs (hack/images.sh, with the
# host's network for apt): applies the suite's updates and security fixes and
# makes the image small the way Debian's own "slim" images are, so that every
# image built FROM it stays small too.
set -eu
export DEBIAN_FRONTEND=noninteractive

# Later package installs skip documentation, manuals and translations
# (copyright files stay: they are the licences).
cat > /etc/dpkg/dpkg.cfg.d/mydb-slim <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG

# Only what a package needs, and no translated package lists.
cat > /etc/apt/apt.conf.d/mydb-slim <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
CFG

# No daemon may start while an image is built (postgresql's postinst would try).
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d

apt-get update
apt-get -y upgrade
apt-get clean

# What debootstrap installed before the excludes above existed.
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/man/* /usr/share/groff/* /usr/share/info/* /usr/share/lintian/*
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +

# Package lists and logs would only make every layer bigger and older.
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
       /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log
