"""The plan reads the transaction coordinators' logs only when a topic it reads holds a transaction."""

import importlib

from datadir_fixtures import ORDERS, TXN_TOPIC
from pulsarkit.analysis.messages import read_messages
from pulsarkit.scan.datadir import open_data_dir

# the module (``pulsarkit.scan.plan`` the attribute is the function the package exports)
plan_mod = importlib.import_module("pulsarkit.scan.plan")


def test_coordinator_logs_read_only_for_topics_with_transactions(synthetic, monkeypatch):
    root, _ = synthetic
    calls = []
    real = plan_mod.coordinator_states

    def counting(dd):
        calls.append(1)
        return real(dd)

    monkeypatch.setattr(plan_mod, "coordinator_states", counting)
    with open_data_dir(root) as dd:
        scan = plan_mod.plan_data_dir(dd, "x", topics=[dd.resolve(ORDERS)], min_partitions=1)
        assert not calls and all(p.coordinator == {} for p in scan.partitions)
        scan = plan_mod.plan_data_dir(dd, "x", topics=[dd.resolve(TXN_TOPIC)], min_partitions=1)
        assert calls and any(p.coordinator for p in scan.partitions)
        # the states still decide the transactional messages (committed only, the open one cut)
        got = [r["payload_b64"] for r in read_messages(dd, TXN_TOPIC)]
        everything = [r["txn"]["state"] if r["txn"] else None for r in read_messages(dd, TXN_TOPIC, txn="all")]
    assert got and "COMMITTED" in everything
