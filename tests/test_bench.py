"""``bcg_envs.bench``'s backend-latency table: medians and ratios to Pusher-v5 from the
measured blocks."""

from bcg_envs import bench


def test_backend_latency_report_gives_medians_and_ratios_to_pusher():
    results = {
        "mujoco": {"wall": [3e-4, 1e-4, 2e-4], "cpu": [1e-4, 1e-4, 1e-4]},
        "Pusher-v5": {"wall": [5e-5, 1e-4, 2e-4], "cpu": [5e-5, 5e-5, 5e-5]},
        "mjx": {"wall": [1e-3, 1e-3, 1e-3], "cpu": [2e-3, 2e-3, 2e-3]},
    }
    text = bench.report_backend_latency(results, "BoxPush-v0")
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in text.splitlines()
        if line.startswith("| ") and "µs" not in line
    }
    assert rows['BoxPush-v0, backend="mujoco"'] == ["200", "100", "2.00x", "2.00x"]
    assert rows["Pusher-v5"] == ["100", "50", "1.00x", "1.00x"]
    assert rows['BoxPush-v0, backend="mjx"'] == ["1000", "2000", "10.00x", "40.00x"]
    assert "median of 3 interleaved blocks" in text
