"""check_grid's command line on the CPU: bad arguments are argparse errors before the CUDA check."""

from __future__ import annotations

import pytest
import torch

from tools.check_grid import main


@pytest.mark.parametrize("batch", ["0", "-3", "two"])
def test_a_bad_batch_is_an_argparse_error_before_the_cuda_check(batch, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        main(["--batch", batch])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --batch: expected an integer >= 1" in err and "CUDA" not in err


def test_a_good_batch_reaches_the_cuda_check(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--batch", "1"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
