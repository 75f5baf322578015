"""bench/launcher.py reports a child's own peak RSS: a child of a large benchmark process is not charged with
the benchmark's resident pages (issue 24: the read paths' peak-memory figures). No timing assertion."""

from __future__ import annotations

import os
import resource
import sys

import launcher

#: what this process grows by before starting the child (the benchmark holding a table)
PARENT_EXTRA = 256 << 20


def test_a_child_reports_its_own_peak_rss_not_its_parents(tmp_path):
    held = bytearray(PARENT_EXTRA)
    for i in range(0, len(held), 4096):  # resident, not just reserved
        held[i] = 1
    parent_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert parent_mib > PARENT_EXTRA >> 20
    pythonpath = os.pathsep.join(sys.path)
    wall, cpu, rss = launcher.run(pythonpath, ["-S", "-c", "pass"], tmp_path, tmp_path / "out")
    assert wall > 0 and cpu >= 0
    # a bare interpreter is about 10 MiB; forked by this process it would report at least parent_mib
    assert rss < 64, (rss, parent_mib)
    grow = "b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"
    _, _, grown = launcher.run(pythonpath, ["-S", "-c", grow], tmp_path, tmp_path / "out")
    assert 96 <= grown < 96 + 64, grown
    del held
