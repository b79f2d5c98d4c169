"""`free_port` never hands out a port twice in one process: the kernel may give a port it just gave
(closed again since) to the next bind, and a test that asked for two ports one after the other (an nginx
site's HTTP and HTTPS listeners) got one port twice: nginx then found its plain listener on the TLS
port without a certificate and refused to start."""

from __future__ import annotations

from helpers.serve_process import free_port


def test_ports_asked_for_one_after_the_other_all_differ():
    # 2,000 ports that are only free at the moment each is drawn repeat some (about 70 repeats if the
    # kernel drew from its ~28,000 ephemeral ports uniformly); this failed before free_port kept count
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
