"""Kernel timings on one CUDA GPU, for tests that check the time model's kernel shapes against a
machine nobody here modelled.

Run on the GPU (PyTorch with CUDA): ``python benchmarks/gpu_kernels.py OUT.json``.  It measures

* fused attention through PyTorch's ``scaled_dot_product_attention`` with its FlashAttention-2
  backend (``FLASH_ATTENTION``) and its cuDNN backend (``CUDNN_ATTENTION``), forward and
  backward, causal and not, at head dimensions 64 and 128, by sequence length, under the
  protocol of the FlashAttention papers' figures (batch x sequence = 16K tokens, hidden 2,048,
  BF16; FLOPs ``4 b h l^2 d`` forward, halved under the causal mask, backward 2.5 x forward);
* dense BF16 matrix products ``(m, k) x (k, n)`` by ``m``, the large ones (wave quantisation)
  and the skinny ones (a decode step's few rows, bound by reading the weights);
* FP8 products (E4M3, one scale a tensor) beside BF16 at the same shapes, and a device-to-device
  copy (HBM bandwidth);
* grouped BF16 products (``torch.nn.functional.grouped_mm``, one weight matrix an expert) by
  tokens an expert, at the expert shapes of GPT-OSS, Qwen3-30B-A3B and DeepSeek-V3.

With ``--shapes`` it measures instead products by the length of their reduction and by their
width (dense and FP8 and grouped), and grouped products of many experts with few rows each.

Each point is the median of three means of ``REPS`` launches between CUDA events, after warm-up.
``--dry`` runs every code path on the CPU at toy sizes (no timing worth keeping), to check the
script before a GPU is spent on it.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

REPS = 10
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS = 16384
HIDDEN = 2048
SQUARE = 8192
EXPERT_SHAPES = {            # (k, n) of an expert's up (gate + up) and down products
    "gpt-oss fc1": (2880, 5760), "gpt-oss fc2": (2880, 2880),
    "qwen3-30b-a3b fc1": (2048, 1536), "qwen3-30b-a3b fc2": (768, 2048),
    "deepseek-v3 fc1": (7168, 4096), "deepseek-v3 fc2": (2048, 7168),
}
EXPERTS = (4, 16)
DEPTHS = (128, 256, 384, 512, 768, 1024, 1536, 2048, 2880, 4096, 5760, 7168, 8192, 16384)
TOKENS_AN_EXPERT = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def seconds(run, device, reps=REPS) -> float:
    """Median of three means of ``reps`` calls of ``run``, after three warm-up calls."""
    for _ in range(3):
        run()
    means = []
    for _ in range(3):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                run()
            end.record()
            torch.cuda.synchronize()
            means.append(start.elapsed_time(end) / 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                run()
            means.append((time.perf_counter() - t0) / reps)
    return statistics.median(means)


def attention(device, backends, lengths, tokens, hidden) -> list[dict]:
    """TFLOP/s of each backend, pass, mask and head dimension by sequence length."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    for backend in backends:
        for head_dim in (64, 128):
            heads = hidden // head_dim
            for length in lengths:
                batch = tokens // length
                # (b, l, h, d) in memory, as the kernels read it; SDPA takes the (b, h, l, d) view
                q, k, v = (torch.randn(batch, length, heads, head_dim, device=device, dtype=torch.bfloat16)
                           .transpose(1, 2).requires_grad_() for _ in range(3))
                for causal in (False, True):
                    forward = 4 * batch * heads * length**2 * head_dim // (2 if causal else 1)
                    row = dict(backend=backend, head_dim=head_dim, length=length, causal=causal)
                    try:
                        with sdpa_kernel(getattr(SDPBackend, backend)):
                            def fwd():
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            out = fwd()
                            grad = torch.randn_like(out)

                            def bwd():
                                torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
                            t_fwd, t_bwd = seconds(fwd, device), seconds(bwd, device)
                        row.update(forward_s=t_fwd, backward_s=t_bwd, forward_tflops=forward / t_fwd / 1e12,
                                   backward_tflops=2.5 * forward / t_bwd / 1e12)
                    except Exception as error:      # a backend that refuses a shape says so in the file
                        row.update(error=f"{type(error).__name__}: {error}"[:300])
                    rows.append(row)
                del q, k, v
    return rows


def dense(device, square, ms) -> list[dict]:
    """Seconds of ``(m, square) x (square, square)`` BF16 products by ``m``."""
    rows = []
    b = torch.randn(square, square, device=device, dtype=torch.bfloat16)
    for m in ms:
        a = torch.randn(m, square, device=device, dtype=torch.bfloat16)
        t = seconds(lambda: a @ b, device)
        rows.append(dict(m=m, k=square, n=square, seconds=t, tflops=2 * m * square * square / t / 1e12,
                         weight_bytes_per_s=2 * square * square / t))
    return rows


def fp8(device, square, ms) -> list[dict]:
    """Seconds of the same products in FP8 (E4M3, one scale a tensor: ``torch._scaled_mm``, BF16
    out) beside BF16, by ``m``."""
    rows = []
    e4m3 = torch.float8_e4m3fn
    b16 = torch.randn(square, square, device=device, dtype=torch.bfloat16)
    b8 = b16.to(e4m3).t().contiguous().t()         # column-major, as the FP8 kernels take it
    one = torch.ones((), device=device, dtype=torch.float32)
    for m in ms:
        a16 = torch.randn(m, square, device=device, dtype=torch.bfloat16)
        a8 = a16.to(e4m3)
        row = dict(m=m, k=square, n=square, bf16_seconds=seconds(lambda: a16 @ b16, device))
        try:
            row["fp8_seconds"] = seconds(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16),
                                         device)
        except Exception as error:
            row["error"] = f"{type(error).__name__}: {error}"[:300]
        rows.append(row)
    return rows


def copy_bandwidth(device, elements=1 << 30) -> dict:
    """Bytes a second of a device-to-device copy of ``elements`` BF16 values, read and written."""
    src = torch.empty(elements, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = seconds(lambda: dst.copy_(src), device, reps=5)
    return dict(bytes=4 * elements, seconds=t, bytes_per_s=4 * elements / t)


def grouped_mm(a, b, offs):
    """``torch.nn.functional.grouped_mm`` where this PyTorch has it, else ``torch._grouped_mm``."""
    fn = getattr(F, "grouped_mm", None) or torch._grouped_mm
    return fn(a, b, offs=offs)


def grouped(device, shapes, experts, tokens_an_expert) -> list[dict]:
    """Seconds of a grouped product of ``g`` experts, ``m`` tokens each, against one dense product
    of all ``g m`` rows by the same ``(k, n)`` weight (the same FLOPs)."""
    rows = []
    for name, (k, n) in shapes.items():
        for g in experts:
            # (g, n, k) in memory, handed over transposed: the layout the grouped kernels take
            w = torch.randn(g, n, k, device=device, dtype=torch.bfloat16).transpose(-2, -1)
            for m in tokens_an_expert:
                x = torch.randn(g * m, k, device=device, dtype=torch.bfloat16)
                offs = torch.arange(m, g * m + 1, m, device=device, dtype=torch.int32)
                row = dict(shape=name, k=k, n=n, experts=g, m=m)
                try:
                    t = seconds(lambda: grouped_mm(x, w, offs), device)
                    one = seconds(lambda: x @ w[0], device)
                    row.update(seconds=t, tflops=2 * g * m * k * n / t / 1e12, dense_seconds=one,
                               dense_tflops=2 * g * m * k * n / one / 1e12)
                except Exception as error:
                    row.update(error=f"{type(error).__name__}: {error}"[:300])
                rows.append(row)
                del x
            del w
    return rows


def reductions(device, rows, cols, depths, experts=16, tokens=2048) -> dict:
    """Products by the length of their reduction ``k`` and by their width ``n``: dense BF16
    ``(rows, k) x (k, cols)`` and FP8 at the same shapes, and grouped BF16 of ``experts`` weight
    matrices, ``tokens`` rows each; then the widths at ``k = cols``."""
    out = dict(dense=[], fp8=[], grouped=[])
    e4m3, one = torch.float8_e4m3fn, torch.ones((), device=device, dtype=torch.float32)
    shapes = [(k, cols) for k in depths] + [(cols, n) for n in depths if n != cols]
    for k, n in shapes:
        a = torch.randn(rows, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        out["dense"].append(dict(m=rows, k=k, n=n, seconds=seconds(lambda: a @ b, device)))
        a8, b8 = a.to(e4m3), b.to(e4m3).t().contiguous().t()
        try:
            t8 = seconds(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), device)
            out["fp8"].append(dict(m=rows, k=k, n=n, seconds=t8))
        except Exception as error:
            out["fp8"].append(dict(m=rows, k=k, n=n, error=f"{type(error).__name__}: {error}"[:300]))
        w = torch.randn(experts, n, k, device=device, dtype=torch.bfloat16).transpose(-2, -1)
        x = torch.randn(experts * tokens, k, device=device, dtype=torch.bfloat16)
        offs = torch.arange(tokens, experts * tokens + 1, tokens, device=device, dtype=torch.int32)
        out["grouped"].append(dict(experts=experts, m=tokens, k=k, n=n,
                                   seconds=seconds(lambda: grouped_mm(x, w, offs), device)))
        del a, b, a8, b8, w, x
    return out


def few_rows(device, k, n, experts, tokens_an_expert) -> list[dict]:
    """Grouped BF16 products of many experts with few rows each (a decode step's, a small
    micro-batch's): bound by reading every expert's weights."""
    rows = []
    for g in experts:
        w = torch.randn(g, n, k, device=device, dtype=torch.bfloat16).transpose(-2, -1)
        for m in tokens_an_expert:
            x = torch.randn(g * m, k, device=device, dtype=torch.bfloat16)
            offs = torch.arange(m, g * m + 1, m, device=device, dtype=torch.int32)
            rows.append(dict(experts=g, m=m, k=k, n=n, seconds=seconds(lambda: grouped_mm(x, w, offs), device)))
        del w
    return rows


def machine(device) -> dict:
    """What ran: the device, PyTorch, cuDNN."""
    facts = dict(torch=torch.__version__, date=time.strftime("%Y-%m-%d"))
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        facts.update(device=props.name, sms=props.multi_processor_count, memory=props.total_memory,
                     cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    return facts


def main(path, dry=False):
    device = "cpu" if dry else "cuda"
    if "--shapes" in sys.argv:
        small = dry
        record = dict(machine=machine(device),
                      reductions=reductions(device, 64 if small else 16384, 64 if small else 4096,
                                            (32, 64) if small else DEPTHS, experts=2 if small else 16,
                                            tokens=16 if small else 2048),
                      few_rows=few_rows(device, 64 if small else 4096, 64 if small else 4096,
                                        (2,) if small else (8, 32, 64, 128), (8, 16) if small else (8, 16, 64)))
    elif dry:
        record = dict(machine=machine(device),
                      attention=attention(device, ("MATH",), (64, 128), 256, 256),
                      dense=dense(device, 256, (1, 16, 256)),
                      grouped=grouped(device, {"toy": (64, 128)}, (2,), (16, 32)),
                      copy=copy_bandwidth(device, 1 << 16))
    else:
        record = dict(machine=machine(device),
                      attention=attention(device, ("FLASH_ATTENTION", "CUDNN_ATTENTION"), LENGTHS, TOKENS, HIDDEN),
                      dense=dense(device, SQUARE, (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
                                  + tuple(range(2304, 8193, 256)) + (4224, 4352, 8320)),
                      grouped=grouped(device, EXPERT_SHAPES, EXPERTS, TOKENS_AN_EXPERT),
                      fp8=fp8(device, SQUARE, (16, 128, 1024, 2048, 4096, 8192)),
                      copy=copy_bandwidth(device))
    with open(path, "w") as out:
        json.dump(record, out, indent=1)
    print(json.dumps(record["machine"]), {k: len(v) for k, v in record.items()})
    print("copy", record.get("copy"))
    for row in [*record.get("attention", ()), *record.get("grouped", ()), *record.get("fp8", ())]:
        if "error" in row:
            print("error:", row)


if __name__ == "__main__":
    main(sys.argv[1], dry="--dry" in sys.argv)
