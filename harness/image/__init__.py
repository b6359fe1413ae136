"""The node image: a Debian bookworm root filesystem with everything a node needs, built locally.

There is no container registry here, so nothing is pulled: the base layer is a `debootstrap`ed
rootfs (Debian packages from the mirror the host's apt already uses) imported with `docker import`;
the node layer adds our own wheels (cluster-impl and its dependencies, built on the host) and the
scripts in `files/`. Both layers are cached by a content hash stored as an image label, so a second
build is a no-op and a cluster-impl change rebuilds only the node layer.
"""
