"""The embedded server's memory is sized to the machine."""

from __future__ import annotations

from pathlib import Path

from orchestrator.store.server_tuning import CONF, INCLUDE, memory_settings, tune_cluster

GB = 1024**3


def test_a_quarter_of_memory_for_shared_buffers_within_bounds():
    assert memory_settings(24 * GB) == {"shared_buffers": "6144MB", "maintenance_work_mem": "1536MB"}
    assert memory_settings(GB // 4) == {"shared_buffers": "128MB", "maintenance_work_mem": "64MB"}
    assert memory_settings(256 * GB) == {"shared_buffers": "8192MB", "maintenance_work_mem": "2048MB"}


def test_the_settings_file_is_included_once_and_rewritten_for_the_machine(tmp_path: Path):
    main = tmp_path / "postgresql.conf"
    main.write_text("max_connections = 100\n")

    assert tune_cluster(tmp_path, total_bytes=8 * GB)
    assert not tune_cluster(tmp_path, total_bytes=8 * GB), "nothing changed the second time"
    assert main.read_text().count(INCLUDE) == 1
    assert "shared_buffers = '2048MB'" in (tmp_path / CONF).read_text()

    assert tune_cluster(tmp_path, total_bytes=16 * GB), "another machine's memory"
    assert "shared_buffers = '4096MB'" in (tmp_path / CONF).read_text()
    assert main.read_text().count(INCLUDE) == 1
