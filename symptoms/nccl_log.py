"""Any log with NCCL_DEBUG=INFO lines (a training rank's output, a launcher's log) -> the transport NCCL chose,
GPUDirect RDMA, and the NCCL settings the environment overrides. nccl-tests outputs and vLLM or SGLang server
logs with status lines have their own parsers, which read the same NCCL lines."""
import re

from . import engine_log, nccl_tests
from .common import Artifact, fail
from .nccl_tests import read_nccl_info

# NCCL's own line prefix, "host:pid:tid [cudaDev] NCCL INFO", after an optional launcher or vLLM worker prefix
_NCCL_LINE = re.compile(r"(?m)^(?:\(\w+ pid=\d+\) |\[\d+,\d+\]<std\w+>:)?[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO ")


def detect(text: str) -> bool:
    head = text[:2_000_000]
    return bool(_NCCL_LINE.search(head)) and not nccl_tests.detect(text) and not engine_log.detect(text)


def parse(text: str, where: str) -> Artifact:
    signals, ctx, notes = {}, {}, []
    read_nccl_info(text.splitlines(), signals, ctx, notes)
    if not signals:
        fail(where, 1, "NCCL INFO", "NCCL INFO lines but no 'Channel ... via', 'Using network' or 'set by environment' "
             "line: rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET")
    return Artifact("nccl_log", signals, ctx, notes)
