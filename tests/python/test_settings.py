"""Settings and start-up messages (issue 12): errors name the setting (and the file line), an
invalid log level is refused, --print-config shows every setting's source, --version names the
commit, the log has no colour codes when it is not a terminal, the start-up line gives the
absolute data directory, and a data directory in use or that is a file is refused."""

import re
import subprocess
import time

from conftest import free_port


def run(ringgate_bin, *args, cwd=None):
    return subprocess.run([str(ringgate_bin), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_version_names_the_commit(ringgate_bin):
    out = run(ringgate_bin, "--version")
    assert out.returncode == 0, out
    assert re.fullmatch(r"ringgate \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)\)\n", out.stdout), out.stdout


def test_setting_errors_name_the_key_and_line(ringgate_bin, tmp_path):
    out = run(ringgate_bin, "serve", "--set", "throughput.default_table_ru=abc")
    assert out.returncode == 2
    assert out.stderr == ('ringgate: --set throughput.default_table_ru=abc: throughput.default_table_ru: '
                          'expected an integer, got "abc"\n'), out.stderr
    conf = tmp_path / "ringgate.toml"
    conf.write_text('listen = "127.0.0.1:0"\n\n[throughput]\nburst = true\nfoo = 1\n')
    out = run(ringgate_bin, "serve", "--config", str(conf))
    assert out.returncode == 2
    assert out.stderr == f"ringgate: {conf}:5: throughput.foo: unknown setting\n", out.stderr
    conf.write_text('[throughput]\ndefault_table_ru = "abc"\n')
    out = run(ringgate_bin, "serve", "--config", str(conf))
    assert out.stderr == (f'ringgate: {conf}:2: throughput.default_table_ru: expected an integer, '
                          f'got "abc"\n'), out.stderr
    out = run(ringgate_bin, "serve", "--log-level", "verbose")
    assert out.returncode == 2
    assert out.stderr.startswith("ringgate: log_level: expected one of trace, debug, info, warn, error, off"), out
    assert 'got "verbose"' in out.stderr


def test_print_config_shows_sources(ringgate_bin, tmp_path):
    conf = tmp_path / "ringgate.toml"
    conf.write_text("# loads\n[throughput]\nburst = false\n")
    out = run(ringgate_bin, "serve", "--print-config", "--config", str(conf), "--set", "throughput.enforce=all",
              "--data-dir", "/srv/rg", "--set", "limits.max_page_bytes=4MiB")
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert f"throughput.burst = false  # {conf}:3" in lines
    assert 'throughput.enforce = "all"  # --set' in lines
    assert 'data_dir = "/srv/rg"  # --data-dir' in lines
    assert "limits.max_page_bytes = 4194304  # --set" in lines
    assert "throughput.default_table_ru = 400  # default" in lines
    assert 'throughput.enforce = "provisioned"  # default' in run(ringgate_bin, "serve", "--print-config").stdout


def start_and_wait(ringgate_bin, cwd, *args):
    """Starts `ringgate serve ARGS` in cwd; returns (process, log path) once it listens."""
    log = cwd / "server.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(ringgate_bin), "serve", *args], cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    for _ in range(300):
        if "listening on" in log.read_text() or proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc, log


def test_log_is_plain_and_names_the_absolute_data_dir(ringgate_bin, tmp_path):
    proc, log = start_and_wait(ringgate_bin, tmp_path, "--listen", f"127.0.0.1:{free_port()}",
                               "--data-dir", "rel/data", "--set", "http.listen=127.0.0.1:0")
    try:
        text = log.read_text()
        assert f"data in {tmp_path.resolve()}/rel/data" in text, text
        assert "\x1b[" not in text, repr(text)
    finally:
        proc.terminate()
        proc.wait(10)


def test_data_dir_in_use_or_a_file_is_refused(ringgate_bin, server_factory, tmp_path):
    srv = server_factory()
    out = run(ringgate_bin, "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(srv.data_dir))
    assert out.returncode == 1
    assert (f"data directory {srv.data_dir.resolve()} is in use by another ringgate process "
            f"(pid {srv.proc.pid})") in out.stdout, out
    # The first server is untouched.
    assert srv.running()
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = run(ringgate_bin, "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(afile))
    assert out.returncode == 1
    assert f"data directory {afile} is a file, not a directory" in out.stdout, out
