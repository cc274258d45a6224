"""A prometheus_client exporter in a thread serving the current-period series of some scenarios."""
import socket
import time

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScenarioCollector:
    """Yields one untyped family per sample name, computed at scrape time."""

    def __init__(self, scenarios):
        self.scenarios = scenarios
        self.bounds = [sc.bounds() for sc in scenarios]

    def collect(self):
        now, families = time.time(), {}
        for sc, b in zip(self.scenarios, self.bounds):
            for s in sc.samples(now, "current", b):
                fam = families.get(s.name)
                if fam is None:
                    fam = families[s.name] = Metric(s.name, "scenario series", "untyped")
                fam.add_sample(s.name, s.labels, s.value)
        yield from families.values()


def start_exporter(scenarios):
    """(port, server) of an exporter in a daemon thread; server.shutdown() stops it."""
    registry = CollectorRegistry()
    registry.register(ScenarioCollector(scenarios))
    port = free_port()
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    return port, server
