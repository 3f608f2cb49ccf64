"""benchmarks/decode_timeline.py's reading of a CUPTI trace (on the CPU, a trace written here):
device activities only, kernel names without their template arguments, and the idle gaps summed
by the activities on either side, per token."""
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    spec = importlib.util.spec_from_file_location("decode_timeline",
                                                  os.path.join(ROOT, "benchmarks", "decode_timeline.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gaps_are_summed_by_their_neighbours_per_token(tmp_path, capsys):
    tl = _tool()
    copy = "Memcpy HtoD (Pinned -> Device)"
    events = []
    for t in range(2):  # two tokens: a copy, a gap of 5 us, a kernel, a gap of 2 us, another kernel
        base = 100.0 * t
        events += [{"ph": "X", "cat": "gpu_memcpy", "name": copy, "ts": base, "dur": 1.0},
                   {"ph": "X", "cat": "kernel", "name": "void lf_gemv_nk_to<float, 4>(long long const*)",
                    "ts": base + 6.0, "dur": 10.0},
                   {"ph": "X", "cat": "kernel", "name": "lf_red_abc(long long const*, int)", "ts": base + 18.0,
                    "dur": 3.0},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": base + 1.0, "dur": 50.0}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    got = tl.device_events(str(path))
    assert [e[2] for e in got[:3]] == [copy, "lf_gemv_nk_to", "lf_red_abc"]
    assert len(got) == 6  # the host's op is not a device activity
    tl.report(got, 2, top=5)
    out = capsys.readouterr().out
    assert f"5.00 us  x  1.0  {copy} -> lf_gemv_nk_to" in out
    assert "2.00 us  x  1.0  lf_gemv_nk_to -> lf_red_abc" in out
    assert "39.50 us  x  0.5  lf_red_abc -> " + copy in out  # 79 us between the tokens, over 2 tokens
    assert "10.00 us  x  1.0  [kernel] lf_gemv_nk_to" in out
