#!/usr/bin/env bash
# Device run E (short): pack at 577 tokens after the tile cap, then the quick subset, timestamped.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
W=$PWD/.whl
python3 - <<'PY'
import torch
from ragged_kernels import pack_tokens, unpack_tokens
for n, b in ((197, 32), (577, 32)):
    x = torch.randn(b, n, 768, device="cuda", dtype=torch.float16)
    keep = torch.rand(b, n, device="cuda") < 0.5
    packed, cu = pack_tokens(x, keep)
    assert torch.equal(unpack_tokens(packed, keep, cu), torch.where(keep[..., None], x, 0))
    for name, f in (("pack", lambda: pack_tokens(x, keep)), ("unpack", lambda: unpack_tokens(packed, keep, cu))):
        for _ in range(3): f()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        torch.cuda.synchronize(); s.record()
        for _ in range(50): f()
        e.record(); e.synchronize()
        print(f"B={b} N={n} {name}: {s.elapsed_time(e) / 50 * 1e3:.1f} us per call (eager, events)")
PY
python3 -m pip install -q --no-index --no-deps $(ls .whl/*.whl | grep -v '/pip-') 2>&1 | tail -1
rm -rf /tmp/repo; git clone -q .whl/repo.bundle /tmp/repo 2>/dev/null && cd /tmp/repo && git checkout -q main || exit 3
T1=$(date +%s)
timeout ${LIMIT:-120} python3 -m ci run --commits $(git rev-parse HEAD) --quick --no-resume --machine h200 --dashboard '' \
  --wheelhouse $W --db $OUT/quick.sqlite 2>&1 | while IFS= read -r l; do echo "$(( $(date +%s) - T1 )) $l"; done > $OUT/quick.log
echo "quick subset: wall=$(( $(date +%s) - T1 ))s"
grep -E "^[0-9]+ (\[|\S*runner|error)" $OUT/quick.log | cut -c1-120 | tail -n 25
