"""Printed output of seed 001 (PyComm ``prefill.py``, rank 7 of 16): Ulysses attention and
a 2-D (TP x DP) MLP at 60,000 tokens, bf16.  Printed lines, host prefix removed; data only.
"""

CONFIG = dict(N=60000, d=16384, h=128, d_ff=53248, layers=126, TP=8, DP=2, bytes=2)
"""Sequence, hidden, heads, MLP width (3.25 d), layers, degrees (P = TP x DP = 16), bf16."""

LINES = """\
seq length: 60000
hidden dim: 16384
num heads: 128
type: torch.bfloat16
TP: 8
DP: 2
P: 16
head per GPU: 8 tokens per GPU: 3750
Ulysses attention
input [N/P, d]: torch.Size([3750, 16384]), elements: 61440000, size: 122.88 MB
Q [h, d, d/h]: torch.Size([128, 16384, 128]), elements: 268435456, size: 536.87 MB
K [h, d, d/h]: torch.Size([128, 16384, 128]), elements: 268435456, size: 536.87 MB
V [h, d, d/h]: torch.Size([128, 16384, 128]), elements: 268435456, size: 536.87 MB
O [h, d/h, d]: torch.Size([128, 128, 16384]), elements: 268435456, size: 536.87 MB
Peak memory allocation: 2.27 GB
compute q, k, v
q = input x Q, k = input x K, v = input x V
flops: 96.64 TFLOPs
q [h, N/P, d/h]: torch.Size([128, 3750, 128]), elements: 61440000, size 122.88 MB
k [h, N/P, d/h]: torch.Size([128, 3750, 128]), elements: 61440000, size 122.88 MB
v [h, N/P, d/h]: torch.Size([128, 3750, 128]), elements: 61440000, size 122.88 MB
Peak memory allocation: 2.68 GB
q_, k_, v_ = all-to-all q, k, v
q_ [P, h/P, N/P, d/h]: torch.Size([16, 8, 3750, 128]), elements: 61440000, size 122.88 MB
k_ [P, h/P, N/P, d/h]: torch.Size([16, 8, 3750, 128]), elements: 61440000, size 122.88 MB
v_ [P, h/P, N/P, d/h]: torch.Size([16, 8, 3750, 128]), elements: 61440000, size 122.88 MB
Peak memory allocation: 3.05 GB
transpose(0, 1) q_, k_, v_ & reshape
q_ [h/P, N, d/h]: torch.Size([8, 60000, 128]), elements: 61440000, size 122.88 MB
k_ [h/P, N, d/h]: torch.Size([8, 60000, 128]), elements: 61440000, size 122.88 MB
v_ [h/P, N, d/h]: torch.Size([8, 60000, 128]), elements: 61440000, size 122.88 MB
is_contiguous: True
Peak memory allocation: 3.17 GB
compute attention
A = q_ x k_t
flops: 117.96 TFLOPs
A [h/P, N, N]: torch.Size([8, 60000, 60000]), elements: 28800000000, size 57.60 GB
is_contiguous: True
Peak memory allocation: 60.65 GB
compute c
c = A x v_
flops: 117.96 TFLOPs
c [h/P, N, d/h]: torch.Size([8, 60000, 128]), elements: 61440000, size 122.88 MB
is_contiguous: True
Peak memory allocation: 60.77 GB
transpose(0, 1) c
c [N, h/P, d/h]: torch.Size([60000, 8, 128]), elements: 61440000, size 122.88 MB
is_contiguous: True
Peak memory allocation: 60.90 GB
c_ = all-to-all c
c_ [P, N/P, h/P, d/h]: torch.Size([16, 3750, 8, 128]), elements: 61440000, size 122.88 MB
Peak memory allocation: 60.90 GB
transpose(0, 1) c_ & reshape c_ and O
c_ [N/P, d]: torch.Size([3750, 16384]), elements: 61440000, size 122.88 MB
is_contiguous: True
O [d, d]: torch.Size([16384, 16384]), elements: 268435456, size 536.87 MB
Peak memory allocation: 61.02 GB
compute output
output = c x O
flops: 32.21 TFLOPs
output [N/P, d]: torch.Size([3750, 16384]), elements: 61440000, size 122.88 MB
Peak memory allocation: 61.02 GB
TP ranks: [0, 1, 2, 3, 4, 5, 6, 7]
2D Model parallel
input_ [N/DP/TP, d]: torch.Size([30000, 16384]), elements: 491520000, size: 0.98 GB
W1 [L, d, d'/TP]: torch.Size([126, 16384, 6656]), elements: 13740539904, size: 27.48 GB
W2 [L, d'/TP, d]: torch.Size([126, 6656, 16384]), elements: 13740539904, size: 27.48 GB
inter = input x W1
inter [N/DP, d'/TP]: torch.Size([30000, 6656]), elements: 199680000, size: 399.36 MB
Current memory allocation: 56.50 GB
Peak memory allocation: 61.02 GB
"""
