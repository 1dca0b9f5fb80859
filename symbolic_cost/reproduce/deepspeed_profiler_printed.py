"""Printed output of seed 004 (DeepSpeed flops profiler README): the BERT-base profile
(A6000, "batch size 1, sequence length 128") and the Megatron-LM GPT-2 example.  Data only."""

BERT = """\
Profile Summary at step 3:
Notations:
data parallel size (dp_size), model parallel size(mp_size),
number of parameters (params), number of multiply-accumulate operations(MACs),
number of floating-point operations (flops), floating-point operations per second (FLOPS),
fwd latency (forward propagation latency), bwd latency (backward propagation latency),
step (weights update latency), iter latency (sum of fwd, bwd and step latency)

params per device:                                            109.48 M
params of model = params per device * mp_size:                109.48 M
fwd MACs per device:                                          44.7 GMACs
fwd flops per device:                                         89.45 G
fwd flops of model = fwd flops per device * mp_size:          89.45 G
fwd latency:                                                  135.52 ms
fwd FLOPS per device = fwd flops per device / fwd latency:    660.07 GFLOPS

----------------------------- Aggregated Profile per device -----------------------------
Top 10 modules in terms of params, MACs or fwd latency at different model depths:
depth 0:
    params      - {'BertModel': '109.48 M'}
    MACs        - {'BertModel': '44.7 GMACs'}
    fwd latency - {'BertModel': '135.52 ms'}
depth 1:
    params      - {'BertEncoder': '85.05 M', 'BertEmbeddings': '23.84 M', 'BertPooler': '590.59 k'}
    MACs        - {'BertEncoder': '44.69 GMACs', 'BertPooler': '2.36 MMACs', 'BertEmbeddings': '0 MACs'}
    fwd latency - {'BertEncoder': '134.11 ms', 'BertEmbeddings': '1.24 ms', 'BertPooler': '173.57 us'}
depth 2:
    params      - {'ModuleList': '85.05 M', 'Embedding': '23.84 M', 'Linear': '590.59 k', 'LayerNorm': '1.54 k', 'Dropout': '0', 'Tanh': '0'}
    MACs        - {'ModuleList': '44.69 GMACs', 'Linear': '2.36 MMACs', 'Embedding': '0 MACs', 'LayerNorm': '0 MACs', 'Dropout': '0 MACs', 'Tanh': '0 MACs'}
    fwd latency - {'ModuleList': '133.94 ms', 'Embedding': '758.65 us', 'LayerNorm': '205.04 us', 'Linear': '93.94 us', 'Tanh': '37.91 us', 'Dropout': '14.78 us'}
depth 3:
    params      - {'BertLayer': '85.05 M'}
    MACs        - {'BertLayer': '44.69 GMACs'}
    fwd latency - {'BertLayer': '133.94 ms'}
depth 4:
    params      - {'BertAttention': '28.37 M', 'BertIntermediate': '28.35 M', 'BertOutput': '28.34 M'}
    MACs        - {'BertAttention': '15.7 GMACs', 'BertIntermediate': '14.5 GMACs', 'BertOutput': '14.5 GMACs'}
    fwd latency - {'BertAttention': '60.64 ms', 'BertIntermediate': '37.63 ms', 'BertOutput': '34.44 ms'}
depth 5:
    params      - {'Linear': '56.67 M', 'BertSelfAttention': '21.26 M', 'BertSelfOutput': '7.11 M', 'LayerNorm': '18.43 k', 'GELUActivation': '0', 'Dropout': '0'}
    MACs        - {'Linear': '28.99 GMACs', 'BertSelfAttention': '12.08 GMACs', 'BertSelfOutput': '3.62 GMACs', 'GELUActivation': '0 MACs', 'LayerNorm': '0 MACs', 'Dropout': '0 MACs'}
    fwd latency - {'Linear': '62.62 ms', 'BertSelfAttention': '47.87 ms', 'BertSelfOutput': '12.48 ms', 'GELUActivation': '4.41 ms', 'LayerNorm': '2.21 ms', 'Dropout': '290.63 us'}

------------------------------ Detailed Profile per device ------------------------------
Each module profile is listed after its name in the following order:
params, percentage of total params, MACs, percentage of total MACs, fwd latency, percentage of total fwd latency, fwd FLOPS

Note: 1. A module can have torch.nn.module or torch.nn.functional to compute logits (e.g. CrossEntropyLoss). They are not counted as submodules, thus not to be printed out. However they make up the difference between a parent's MACs (or latency) and the sum of its submodules'.
1. Number of floating-point operations is a theoretical estimation, thus FLOPS computed using that could be larger than the maximum system throughput.
2. The fwd latency listed in the top module's profile is directly captured at the module forward function in PyTorch, thus it's less than the fwd latency shown above which is captured in DeepSpeed.

BertModel(
  109.48 M, 100.00% Params, 44.7 GMACs, 100.00% MACs, 135.52 ms, 100.00% latency, 660.07 GFLOPS,
  (embeddings): BertEmbeddings(
    23.84 M, 21.77% Params, 0 MACs, 0.00% MACs, 1.24 ms, 0.91% latency, 1.59 GFLOPS,
    (word_embeddings): Embedding(23.44 M, 21.41% Params, 0 MACs, 0.00% MACs, 574.83 us, 0.42% latency, 0.0 FLOPS, 30522, 768, padding_idx=0)
    (position_embeddings): Embedding(393.22 k, 0.36% Params, 0 MACs, 0.00% MACs, 40.29 us, 0.03% latency, 0.0 FLOPS, 512, 768)
    (token_type_embeddings): Embedding(1.54 k, 0.00% Params, 0 MACs, 0.00% MACs, 143.53 us, 0.11% latency, 0.0 FLOPS, 2, 768)
    (LayerNorm): LayerNorm(1.54 k, 0.00% Params, 0 MACs, 0.00% MACs, 205.04 us, 0.15% latency, 9.59 GFLOPS, (768,), eps=1e-12, elementwise_affine=True)
    (dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 14.78 us, 0.01% latency, 0.0 FLOPS, p=0.1, inplace=False)
  )
  (encoder): BertEncoder(
    85.05 M, 77.69% Params, 44.69 GMACs, 99.99% MACs, 134.11 ms, 98.96% latency, 666.97 GFLOPS,
    (layer): ModuleList(
      85.05 M, 77.69% Params, 44.69 GMACs, 99.99% MACs, 133.94 ms, 98.83% latency, 667.8 GFLOPS,
      (0): BertLayer(
        7.09 M, 6.47% Params, 3.72 GMACs, 8.33% MACs, 12.5 ms, 9.22% latency, 596.26 GFLOPS,
        (attention): BertAttention(
          2.36 M, 2.16% Params, 1.31 GMACs, 2.93% MACs, 5.61 ms, 4.14% latency, 466.73 GFLOPS,
          (self): BertSelfAttention(
            1.77 M, 1.62% Params, 1.01 GMACs, 2.25% MACs, 4.4 ms, 3.25% latency, 457.42 GFLOPS,
            (query): Linear(590.59 k, 0.54% Params, 301.99 MMACs, 0.68% MACs, 996.35 us, 0.74% latency, 606.19 GFLOPS, in_features=768, out_features=768, bias=True)
            (key): Linear(590.59 k, 0.54% Params, 301.99 MMACs, 0.68% MACs, 794.89 us, 0.59% latency, 759.83 GFLOPS, in_features=768, out_features=768, bias=True)
            (value): Linear(590.59 k, 0.54% Params, 301.99 MMACs, 0.68% MACs, 813.72 us, 0.60% latency, 742.24 GFLOPS, in_features=768, out_features=768, bias=True)
            (dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 14.31 us, 0.01% latency, 0.0 FLOPS, p=0.1, inplace=False)
          )
          (output): BertSelfOutput(
            592.13 k, 0.54% Params, 301.99 MMACs, 0.68% MACs, 1.19 ms, 0.88% latency, 508.91 GFLOPS,
            (dense): Linear(590.59 k, 0.54% Params, 301.99 MMACs, 0.68% MACs, 808.72 us, 0.60% latency, 746.84 GFLOPS, in_features=768, out_features=768, bias=True)
            (LayerNorm): LayerNorm(1.54 k, 0.00% Params, 0 MACs, 0.00% MACs, 197.41 us, 0.15% latency, 9.96 GFLOPS, (768,), eps=1e-12, elementwise_affine=True)
            (dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 10.25 us, 0.01% latency, 0.0 FLOPS, p=0.1, inplace=False)
          )
        )
        (intermediate): BertIntermediate(
          2.36 M, 2.16% Params, 1.21 GMACs, 2.70% MACs, 3.78 ms, 2.79% latency, 639.51 GFLOPS,
          (dense): Linear(2.36 M, 2.16% Params, 1.21 GMACs, 2.70% MACs, 3.35 ms, 2.47% latency, 721.68 GFLOPS, in_features=768, out_features=3072, bias=True)
          (intermediate_act_fn): GELUActivation(0, 0.00% Params, 0 MACs, 0.00% MACs, 408.65 us, 0.30% latency, 0.0 FLOPS, )
        )
        (output): BertOutput(
          2.36 M, 2.16% Params, 1.21 GMACs, 2.70% MACs, 3.01 ms, 2.22% latency, 803.66 GFLOPS,
          (dense): Linear(2.36 M, 2.16% Params, 1.21 GMACs, 2.70% MACs, 2.62 ms, 1.93% latency, 921.53 GFLOPS, in_features=3072, out_features=768, bias=True)
          (LayerNorm): LayerNorm(1.54 k, 0.00% Params, 0 MACs, 0.00% MACs, 191.93 us, 0.14% latency, 10.24 GFLOPS, (768,), eps=1e-12, elementwise_affine=True)
          (dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 25.51 us, 0.02% latency, 0.0 FLOPS, p=0.1, inplace=False)
        )
      )
      (1): BertLayer(...)
      ...
      (11): BertLayer(...)
    )
  )
  (pooler): BertPooler(
    590.59 k, 0.54% Params, 2.36 MMACs, 0.01% MACs, 173.57 us, 0.13% latency, 27.19 GFLOPS,
    (dense): Linear(590.59 k, 0.54% Params, 2.36 MMACs, 0.01% MACs, 93.94 us, 0.07% latency, 50.23 GFLOPS, in_features=768, out_features=768, bias=True)
    (activation): Tanh(0, 0.00% Params, 0 MACs, 0.00% MACs, 37.91 us, 0.03% latency, 0.0 FLOPS, )
  )
)
------------------------------------------------------------------------------
Number of flops:                89.45 G
Number of MACs:                 44.7 GMACs
Number of parameters:           109.48 M
"""

MEGATRON = """\
Profile Summary at step 10:
Notations:
data parallel size (dp_size), model parallel size(mp_size),
number of parameters (params), number of multiply-accumulate operations(MACs),
number of floating-point operations (flops), floating-point operations per second (FLOPS),
fwd latency (forward propagation latency), bwd latency (backward propagation latency),
step (weights update latency), iter latency (sum of fwd, bwd and step latency)

world size:                                                   1
data parallel size:                                           1
model parallel size:                                          1
batch size per device:                                           1024
params per gpu:                                               1.29 M
params of model = params per device * mp_size:                   1.29 M
fwd MACs per device:                                             41271.95 G
fwd flops per device:                                            82543.9 G
fwd flops of model = fwd flops per device * mp_size:             82543.9 G
fwd latency:                                                  1.89 s
bwd latency:                                                  5.38 s
fwd FLOPS per device = fwd flops per device / fwd latency:          43.68 TFLOPS
bwd FLOPS per device = 2 * fwd flops per device / bwd latency:      30.7 TFLOPS
fwd+bwd FLOPS per device = 3 * fwd flops per device / (fwd+bwd latency):   34.07 TFLOPS
step latency:                                                 34.12 s
iter latency:                                                 41.39 s
samples/second:                                               24.74

----------------------------- Aggregated Profile per device -----------------------------
Top 1 modules in terms of params, MACs or fwd latency at different model depths:
depth 0:
    params      - {'GPT2Model': '1.29 M'}
    MACs        - {'GPT2Model': '41271.95 GMACs'}
    fwd latency - {'GPT2Model': '1.84 s'}
depth 1:
    params      - {'TransformerLanguageModel': '1.29 M'}
    MACs        - {'TransformerLanguageModel': '39584.03 GMACs'}
    fwd latency - {'TransformerLanguageModel': '1.83 s'}
depth 2:
    params      - {'ParallelTransformer': '1.29 M'}
    MACs        - {'ParallelTransformer': '39584.03 GMACs'}
    fwd latency - {'ParallelTransformer': '1.81 s'}
depth 3:
    params      - {'ModuleList': '1.28 M'}
    MACs        - {'ModuleList': '39584.03 GMACs'}
    fwd latency - {'ModuleList': '1.3 s'}
depth 4:
    params      - {'ParallelTransformerLayerPart2': '688.15 k'}
    MACs        - {'ParallelTransformerLayerPart2': '26388.28 GMACs'}
    fwd latency - {'ParallelTransformerLayerPart2': '865.73 ms'}
depth 5:
    params      - {'ParallelMLP': '491.54 k'}
    MACs        - {'ParallelMLP': '26388.28 GMACs'}
    fwd latency - {'ParallelMLP': '849.4 ms'}

------------------------------ Detailed Profile per device ------------------------------
Each module profile is listed after its name in the following order:
params, percentage of total params, MACs, percentage of total MACs, fwd latency, percentage of total fwd latency, fwd FLOPS

Note: 1. A module can have torch.nn.module or torch.nn.functional to compute logits (e.g. CrossEntropyLoss). They are not counted as submodules, thus not to be printed out. However they make up the difference between a parent's MACs(or latency) and the sum of its submodules'.
2. Number of floating-point operations is a theoretical estimation, thus FLOPS computed using that could be larger than the maximum system throughput.
3. The fwd latency listed in the top module's profile is directly captured at the module forward function in PyTorch, thus it's less than the fwd latency shown above which is captured in DeepSpeed.

GPT2Model(
  1.29 M, 100.00% Params, 41271.95 GMACs, 100.00% MACs, 1.84 s, 100.00% latency, 44.78 TFLOPS,
  (language_model): TransformerLanguageModel(
    1.29 M, 100.00% Params, 39584.03 GMACs, 95.91% MACs, 1.83 s, 99.11% latency, 43.34 TFLOPS,
    (embedding): Embedding(
      2, 0.00% Params, 0 MACs, 0.00% MACs, 18.1 ms, 0.98% latency, 0.0 FLOPS,
      (word_embeddings): VocabParallelEmbedding(1, 0.00% Params, 0 MACs, 0.00% MACs, 164.75 us, 0.01% latency, 0.0 FLOPS, )
      (position_embeddings): Embedding(1, 0.00% Params, 0 MACs, 0.00% MACs, 489.23 us, 0.03% latency, 0.0 FLOPS, 1024, 8192)
      (embedding_dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 93.94 us, 0.01% latency, 0.0 FLOPS, p=0.1, inplace=False)
    )
    (transformer): ParallelTransformer(
      1.29 M, 100.00% Params, 39584.03 GMACs, 95.91% MACs, 1.81 s, 98.11% latency, 43.78 TFLOPS,
      (layers): ModuleList(
        1.28 M, 98.73% Params, 39584.03 GMACs, 95.91% MACs, 1.3 s, 70.66% latency, 60.79 TFLOPS,
        (0): ParallelTransformerLayerPart1(
          49.15 k, 3.80% Params, 1099.65 GMACs, 2.66% MACs, 23.5 ms, 1.27% latency, 93.6 TFLOPS,
          (input_layernorm): FusedLayerNorm(16.38 k, 1.27% Params, 0 MACs, 0.00% MACs, 128.75 us, 0.01% latency, 0.0 FLOPS, torch.Size([8192]), eps=1e-05, elementwise_affine=True)
          (attention): ParallelSelfAttention(
            32.77 k, 2.53% Params, 1099.65 GMACs, 2.66% MACs, 22.8 ms, 1.24% latency, 96.46 TFLOPS,
            (query_key_value): ColumnParallelLinear(24.58 k, 1.90% Params, 824.63 GMACs, 2.00% MACs, 8.93 ms, 0.48% latency, 184.7 TFLOPS, )
            (scale_mask_softmax): FusedScaleMaskSoftmax(0, 0.00% Params, 134.22 MMACs, 0.00% MACs, 151.16 us, 0.01% latency, 1.78 TFLOPS, )
            (attention_dropout): Dropout(0, 0.00% Params, 0 MACs, 0.00% MACs, 79.63 us, 0.00% latency, 0.0 FLOPS, p=0.1, inplace=False)
            (dense): RowParallelLinear(8.19 k, 0.63% Params, 274.88 GMACs, 0.67% MACs, 2.67 ms, 0.14% latency, 205.81 TFLOPS, )
          )
        )
        (1): ParallelTransformerLayerPart2(
          57.35 k, 4.43% Params, 2199.02 GMACs, 5.33% MACs, 77.53 ms, 4.21% latency, 56.73 TFLOPS,
          (post_attention_layernorm): FusedLayerNorm(16.38 k, 1.27% Params, 0 MACs, 0.00% MACs, 116.11 us, 0.01% latency, 0.0 FLOPS, torch.Size([8192]), eps=1e-05, elementwise_affine=True)
          (mlp): ParallelMLP(
            40.96 k, 3.16% Params, 2199.02 GMACs, 5.33% MACs, 76.19 ms, 4.13% latency, 57.72 TFLOPS,
            (dense_h_to_4h): ColumnParallelLinear(32.77 k, 2.53% Params, 1099.51 GMACs, 2.66% MACs, 10.79 ms, 0.59% latency, 203.81 TFLOPS, )
            (dense_4h_to_h): RowParallelLinear(8.19 k, 0.63% Params, 1099.51 GMACs, 2.66% MACs, 14.38 ms, 0.78% latency, 152.95 TFLOPS, )
          )
        )
        ...
        (23): ParallelTransformerLayerPart2(...)
      )
      (final_layernorm): FusedLayerNorm(16.38 k, 1.27% Params, 0 MACs, 0.00% MACs, 110.86 us, 0.01% latency, 0.0 FLOPS, torch.Size([8192]), eps=1e-05, elementwise_affine=True)
    )
  )
)
------------------------------------------------------------------------------
"""
