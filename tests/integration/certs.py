"""Certificates for the jobs link's mutual TLS, made at test time with the openssl command the reference (docs/REFERENCE.md) shows: a CA,
a gateway (server role: extendedKeyUsage serverAuth) and a fetcher (client role: clientAuth) certificate signed by it,
and a second (rogue) CA with a certificate of its own in each role."""
import ssl
import subprocess
from pathlib import Path


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=" + name, "-keyout", name + ".key", "-out", name + ".crt", cwd=d)


def _leaf(d, name, ca, role):
    """A P-256 certificate for localhost signed by ca, with extendedKeyUsage role (none when role is None)."""
    ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
    if role is not None:
        ext += "extendedKeyUsage=%s\n" % role
    (d / (name + ".ext")).write_text(ext)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + name,
             "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
             "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt", cwd=d)


class Certs:
    """Files under d: ca, gateway (serverAuth), fetcher (clientAuth), both signed by ca; rogue-ca, rogue (clientAuth) and
    rogue-gateway (serverAuth), both signed by rogue-ca. With odd_roles, also signed by ca: roleless (no
    extendedKeyUsage) and both-roles (serverAuth and clientAuth)."""

    def __init__(self, d, odd_roles=False):
        self.dir = Path(d)
        self.dir.mkdir(parents=True, exist_ok=True)
        _ca(self.dir, "ca")
        _ca(self.dir, "rogue-ca")
        _leaf(self.dir, "gateway", "ca", "serverAuth")
        _leaf(self.dir, "fetcher", "ca", "clientAuth")
        _leaf(self.dir, "rogue", "rogue-ca", "clientAuth")
        _leaf(self.dir, "rogue-gateway", "rogue-ca", "serverAuth")
        if odd_roles:
            _leaf(self.dir, "roleless", "ca", None)
            _leaf(self.dir, "both-roles", "ca", "serverAuth,clientAuth")

    def path(self, name):
        return str(self.dir / name)

    def env(self, leaf, ca="ca"):
        """The VTS_JOBS_TLS_* variables of an end holding leaf's certificate and trusting ca."""
        return {"VTS_JOBS_TLS_CA": self.path(ca + ".crt"), "VTS_JOBS_TLS_CERT": self.path(leaf + ".crt"),
                "VTS_JOBS_TLS_KEY": self.path(leaf + ".key")}

    def client_context(self, leaf=None, ca="ca"):
        """A Python TLS client context trusting ca, presenting leaf's certificate (none when leaf is None)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.path(ca + ".crt"))
        if leaf is not None:
            ctx.load_cert_chain(self.path(leaf + ".crt"), self.path(leaf + ".key"))
        return ctx
