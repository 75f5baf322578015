"""The main job on an embedded default: a producer's traffic in every codec, stored, decoded back, summarised.

Run it with ``python -m pulsarkit.demo`` (``--json`` for machine-readable output).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

import pyarrow as pa

from . import bulk
from .entry import COMPRESSION_TYPES, Entry, add_broker_entry_metadata, encode_batch, encode_entry, message_metadata


def produce(seed: int = 7, batches_per_codec: int = 200) -> tuple[list[bytes], list[tuple[str, int, bytes]]]:
    """Entries as a broker with both PIP-70 interceptors would store them, and the messages sent."""
    rng = random.Random(seed)
    entries: list[bytes] = []
    sent: list[tuple[str, int, bytes]] = []
    index = -1
    clock = 1_700_000_000_000
    for p, codec in enumerate(COMPRESSION_TYPES):
        producer = f"standalone-{p}-{codec.lower()}"
        seq = 0
        for _ in range(batches_per_codec):
            n = rng.choice([1, 1, 5, 10, 50])
            msgs = []
            for _ in range(n):
                order = {"order_id": rng.randrange(10**6), "sku": f"SKU-{rng.randrange(500):03d}", "qty": rng.randrange(1, 9)}
                payload = json.dumps(order).encode()
                msgs.append({"payload": payload, "key": f"customer-{rng.randrange(50)}", "properties": {"source": "web"},
                             "event_time": clock - rng.randrange(1000), "sequence_id": seq})
                sent.append((producer, seq, payload))
                seq += 1
            clock += rng.randrange(1, 20)
            md = message_metadata(producer, msgs[0]["sequence_id"], clock)
            if n == 1:  # the Java producer sends a batch of one as a plain message
                m = msgs[0]
                md.partition_key = m["key"]
                md.event_time = m["event_time"]
                kv = md.properties.add()
                kv.key, kv.value = "source", "web"
                raw = encode_entry(md, m["payload"], compression=None if codec == "NONE" else codec)
            else:
                raw = encode_batch(md, msgs, compression=codec)
            index += n
            entries.append(add_broker_entry_metadata(raw, broker_timestamp=clock + 1, index=index))
    return entries, sent


def summarise(entries: list[bytes], sent: list[tuple[str, int, bytes]]) -> dict[str, Any]:
    arr = pa.array(entries, pa.binary())
    t0 = time.perf_counter()
    meta = bulk.decode_metadata(arr, verify_checksum=True)
    msgs = bulk.explode_messages(arr)
    elapsed = time.perf_counter() - t0
    m = meta.to_pydict()
    rows = msgs.to_pydict()
    decoded = sorted(zip(rows["producer_name"], rows["sequence_id"], rows["payload"]))
    per_codec: dict[str, dict[str, int]] = {}
    for i, codec in enumerate(m["compression"]):
        s = per_codec.setdefault(codec, {"entries": 0, "messages": 0, "stored_bytes": 0, "uncompressed_bytes": 0, "checksum_ok": 0})
        s["entries"] += 1
        s["messages"] += m["num_messages"][i]
        s["stored_bytes"] += m["payload_size"][i]
        s["uncompressed_bytes"] += m["uncompressed_size"][i]
        s["checksum_ok"] += bool(m["checksum_ok"][i])
    last = Entry.parse(entries[-1])
    return {
        "entries": len(entries),
        "messages_sent": len(sent),
        "messages_decoded": len(rows["payload"]),
        "exact_match": decoded == sorted(sent),
        "errors": sum(e is not None for e in m["error"]) + sum(e is not None for e in rows["error"]),
        "last_index": last.broker_entry_metadata.index if last.broker_entry_metadata else None,
        "bulk_decode_seconds": round(elapsed, 4),
        "per_codec": per_codec,
    }


def render(s: dict[str, Any], out: Any = sys.stdout) -> None:
    print("pulsarkit codec demo: a producer's batches in every codec, stored with broker entry metadata", file=out)
    print(f"  {s['entries']} entries, {s['messages_sent']} messages sent, {s['messages_decoded']} decoded, "
          f"exact match: {s['exact_match']}, errors: {s['errors']}, last broker index: {s['last_index']}", file=out)
    print(f"  bulk decode + explode: {s['bulk_decode_seconds']} s", file=out)
    print(f"  {'codec':<8}{'entries':>9}{'messages':>10}{'stored':>12}{'uncompressed':>14}{'ratio':>8}{'crc ok':>8}", file=out)
    for codec, c in sorted(s["per_codec"].items()):
        ratio = c["uncompressed_bytes"] / c["stored_bytes"] if c["stored_bytes"] else 0
        print(f"  {codec:<8}{c['entries']:>9}{c['messages']:>10}{c['stored_bytes']:>12}{c['uncompressed_bytes']:>14}{ratio:>8.2f}{c['checksum_ok']:>8}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pulsarkit-demo", description=__doc__)
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--batches", type=int, default=200, help="batches per codec")
    args = ap.parse_args(argv)
    entries, sent = produce(batches_per_codec=args.batches)
    s = summarise(entries, sent)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        render(s)
    return 0 if s["exact_match"] and not s["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
