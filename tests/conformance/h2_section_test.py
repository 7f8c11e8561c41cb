"""h2_section_test.py - checks that conformance.py's write_report() puts the
HTTP/2 and gRPC table tests/h2/grpc_test.py wrote (BUILD/h2-conformance.md)
into CONFORMANCE.md after the main table, and that without that file it says
the section did not run instead of leaving it out. Nothing is run: the
report is written from an empty matrix into a temporary file.
Usage: h2_section_test.py"""
import os
import shutil
import sys
import tempfile

BUILD = tempfile.mkdtemp(prefix="fn-h2sec-")
REPORT = os.path.join(BUILD, "CONFORMANCE.md")
sys.argv = [sys.argv[0], BUILD, REPORT]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402
import conformance as cf  # noqa: E402

shutil.rmtree(cf.JAVA_DIR, ignore_errors=True)
shutil.rmtree(cf.RUNDIR, ignore_errors=True)
cf.versions = lambda: [("tool", "1.0")]  # no subprocesses: only the layout is checked


def written():
    cf.write_report()
    with open(REPORT) as f:
        return f.read()


def test_table_included():
    table = ("## HTTP/2 and gRPC\n\nintro, HTTP/3 (QUIC) is out of scope.\n\n| client | goaway |\n"
             "|---|---|\n| python grpcio 9.9 (clear text) | OK, 2 att.; real: OK, 2 att. **pass** |\n")
    with open(os.path.join(BUILD, "h2-conformance.md"), "w") as f:
        f.write(table)
    text = written()
    at, main, stories = text.find(table), text.find("| client | blackhole"), text.find("## Stories")
    check("h2 section: grpc_test.py's table is in the report as written, after the main table "
          "and before the stories", 0 <= main < at < stories, text)


def test_missing_said():
    os.unlink(os.path.join(BUILD, "h2-conformance.md"))
    text = written()
    at = text.find("## HTTP/2 and gRPC")
    check("h2 section: without grpc_test.py's table the report says the section did not run "
          "and that HTTP/3 is out of scope",
          at > text.find("| client | blackhole") and at < text.find("## Stories")
          and "did not run in this build" in text[at:] and "HTTP/3 (QUIC) is out of scope"
          in text[at:], text)


for t in checks.selected([test_table_included, test_missing_said]):
    t()
shutil.rmtree(BUILD, ignore_errors=True)
sys.exit(1 if checks.failed else 0)
