"""The container stage cannot run inside a chroot made on a plain folder (a freshly debootstrapped system entered with
chroot): its runtime must remount the root folder. test_containers.py says so and skips (a failure under CI=true,
where every skip is one) instead of failing on podman's "remount /: invalid argument". Here the check itself, in a
real chroot: the test's own folder holding the host's /usr and a /proc, entered in a mount namespace of its own."""
import inspect
import os
import shutil
import subprocess

from conftest import not_here, root_is_a_mount_point

SETUP = """
set -e
mount --make-rprivate /
cd "$1"
mkdir -p usr proc
mount --bind /usr usr
mount -t proc proc proc
for d in bin lib lib64 sbin; do [ -e /$d ] && ln -s usr/$d $d; done
shift
exec chroot . "$@"
"""


def test_a_chroot_is_told_apart_from_a_machine(tmp_path):
    if os.geteuid() != 0:
        not_here("root", "entering a chroot needs root")
    assert shutil.which("unshare") and shutil.which("chroot")
    # This machine (and the containers stage here) is not a chroot.
    assert root_is_a_mount_point() is True
    code = inspect.getsource(root_is_a_mount_point) + "\nprint(root_is_a_mount_point())\n"
    out = subprocess.run(["unshare", "--mount", "sh", "-c", SETUP, "setup", str(tmp_path), "/usr/bin/python3", "-c",
                          code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "False\n", "")
