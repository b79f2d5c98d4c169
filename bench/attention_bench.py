"""Decode attention at VoxCPM2's full-size heads (16 query, 2 key/value heads of 128): polyvox's
`paged_attention` (query heads folded onto their key/value head, a mask, no `enable_gqa`) against
SDPA called with `enable_gqa=True` and the same mask on the same gathered context (the form it
replaced: with a mask PyTorch takes its math path for it). Time per call of one layer's attention.

    python bench/attention_bench.py --device cpu --batch 1,64,256 --context 512 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

import torch
import torch.nn.functional as F

from polyvox.models.layers.attention import AttentionMetadata, gather_context, paged_attention

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 16, 2, 128, 16


def enable_gqa_attention(q, meta, k_pool, v_pool):
    keys, values = gather_context(meta, k_pool, v_pool)
    batch = meta.num_seqs
    mask = torch.arange(meta.max_context_len, device=q.device).view(1, -1) < meta.context_lens.view(-1, 1)
    out = F.scaled_dot_product_attention(
        q.view(batch, 1, HEADS, HEAD_DIM).transpose(1, 2),
        keys.transpose(1, 2),
        values.transpose(1, 2),
        attn_mask=mask.view(batch, 1, 1, -1),
        enable_gqa=True,
    )
    return out.transpose(1, 2).reshape(q.shape)


def measure(batch: int, context: int, device: torch.device, dtype: torch.dtype, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(batch)
    blocks = (context + BLOCK - 1) // BLOCK
    lens = [context - (i * 37) % (context // 2) for i in range(batch)]  # ragged contexts
    tables = [list(range(i * blocks, (i + 1) * blocks)) for i in range(batch)]
    meta = AttentionMetadata.build([n - 1 for n in lens], [1] * batch, tables, BLOCK, device)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(device, dtype)

    k_pool, v_pool = (
        rand(batch * blocks, BLOCK, KV_HEADS, HEAD_DIM),
        rand(batch * blocks, BLOCK, KV_HEADS, HEAD_DIM),
    )
    q, k, v = rand(batch, HEADS, HEAD_DIM), rand(batch, KV_HEADS, HEAD_DIM), rand(batch, KV_HEADS, HEAD_DIM)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def folded():
        return paged_attention(q, k, v, meta, k_pool, v_pool)

    def gqa():
        return enable_gqa_attention(q, meta, k_pool, v_pool)

    diff = float((folded().float() - gqa().float()).abs().max())
    row = {"batch": batch, "context": context, "max_abs_diff": diff}
    for name, fn in (("folded_ms", folded), ("enable_gqa_ms", gqa)):
        for _ in range(3):
            fn()
        sync()
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        row[name] = round(1000 * (time.perf_counter() - t) / repeats, 3)
    return row


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default=None)
    ap.add_argument("--batch", default="1,64,256")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "dtype": dtype_name,
        "rows": [],
    }
    for batch in (int(b) for b in args.batch.split(",")):
        row = measure(batch, args.context, device, getattr(torch, dtype_name), args.repeats)
        results["rows"].append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
