#! /bin/bash
# Provenance: NVIDIA/Megatron-LM, examples/pretrain_gpt.sh,
# commit 090e141cc47ddf3317464bf9af7561b932c131c1; unchanged below this header (test input of
# tests/test_framework_inputs.py, read by `symbolic-cost summary --megatron-args`, never run).

# Runs the "345M" parameter model

RANK=${RANK:-0}
WORLD_SIZE=${WORLD_SIZE:-1}

DATA_PATH=${DATA_PATH:-<Specify path and file prefix>_text_document}
CHECKPOINT_PATH=${CHECKPOINT_PATH:-<Specify path>}


python pretrain_gpt.py \
       --num-layers 24 \
       --hidden-size 1024 \
       --num-attention-heads 16 \
       --micro-batch-size 4 \
       --global-batch-size 8 \
       --seq-length 1024 \
       --max-position-embeddings 1024 \
       --train-iters 500000 \
       --lr-decay-iters 320000 \
       --save $CHECKPOINT_PATH \
       --load $CHECKPOINT_PATH \
       --data-path $DATA_PATH \
       --vocab-file gpt2-vocab.json \
       --merge-file gpt2-merges.txt \
       --data-impl mmap \
       --split 949,50,1 \
       --distributed-backend nccl \
       --lr 0.00015 \
       --min-lr 1.0e-5 \
       --lr-decay-style cosine \
       --weight-decay 1e-2 \
       --clip-grad 1.0 \
       --lr-warmup-fraction .01 \
       --checkpoint-activations \
       --log-interval 100 \
       --save-interval 10000 \
       --eval-interval 1000 \
       --eval-iters 10 \
       --fp16
