"""Bad input, as a new user types it: a corpus of command lines and API calls (every example of
issue 17 and more), each refused with exit status 2 or the library's own error naming the
argument; hypothesis-drawn command lines and config files that end in status 0 or 2, never a
traceback, never a negative or non-finite number; and no ``eval``/``exec``/``parse_expr`` in the
package, only the reader's walk over the syntax tree."""

import builtins
import json
import math
import pathlib
import re
import shlex

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sympy import I, Max, Rational, Symbol

from symbolic_cost import attention, conventions as conv, mlp, transformer_layer
from symbolic_cost import analysis
from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError, InputTypeError, exact
from symbolic_cost.cli import main
from symbolic_cost.models import Architecture, Training, model_cost
from symbolic_cost.models.config import from_config, load, preset
from symbolic_cost.numeric.search import search
from symbolic_cost.numeric.sweep import sweep
from symbolic_cost.numeric.compile import compile_exprs
from symbolic_cost.reader import read, read_number
from symbolic_cost.symbols import b, e, f, l, m1
from symbolic_cost.blocks.wiring import Run

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "symbolic_cost"
CONFIGS = PACKAGE / "models" / "configs"
LLAMA = json.loads((CONFIGS / "llama-2-7b.json").read_text())
GPT2 = json.loads((CONFIGS / "gpt2.json").read_text())

# ---------------------------------------------------------------------------------------------
# The command-line corpus: (command line, a fragment the one-line message must contain, naming
# the argument).  {cfg} is a folder of config files written by the ``cfg`` fixture, {tmp} an
# empty folder with one file in it (``file.csv``).
# ---------------------------------------------------------------------------------------------

CODE = "__import__('os').system('echo pwned')"
CLI = [
    # a chunked loss of 1,024 tokens in 3 equal chunks (it used to answer 9418584064/3 bytes)
    ("summary --preset gpt2 --loss-chunks 3 --json", "loss_chunks=3 must divide the 1024 tokens"),
    # a third probe (2026-11-30): search priced b x 1,024 tokens in 3 chunks (a fraction of a token a chunk)
    ("search --preset gpt2 --devices 8 --global-batch 64 --loss-chunks 3 --top 3",
     "loss_chunks=3 divides the tokens of no layout's micro-batch"),
    ("summary --preset bert-base-uncased --set b=8 l=512 --loss-chunks 2", "has no LM head"),     # was ignored
    ("summary --preset bert-base-uncased --set b=8 l=512 --fused-loss", "has no LM head"),
    ("calibrate --attention --serving --bands", "--attention runs alone"),      # the others were dropped
    ("calibrate --bands --serving", "--bands runs alone"),
    ("sweep --preset gpt2 --grid b=1,2,4 --field total --where 'total <= 1e-31'",
     "a number written finer than 10**-30"),                                   # was told "larger than 10**30"
    ("formula --preset gpt2 --total flops_fwd --set b=1 m1=1 s1=1 d=1 p=1 n_micro=1 --by b*l*e",
     "--by names b, e, which the formula does not hold"),                      # put the fixed b and e back
    # a fifth probe: options the command dropped
    ("inference --preset llama-3-8b --devices 2 --slo-ttft 1 --requests 20 --set b=7",
     "--set gives the request (l_in, l_out) only, got b"),
    ("inference --preset llama-3-8b --ideal --kernel-time tiled", "add --roofline operation"),
    ("table --preset llama-3-8b --block layer --format json --no-bias", "--no-bias: llama-3-8b has no biases"),
    ("table --preset llama-3-8b --block layer --format json --no-qkv-bias", "projections have no biases"),
    ("crossover --preset mistral-7b --set m1=1 s1=1 --allow-long", "--allow-long: the crossover is no sequence past"),
    # Megatron-Core's TransformerConfig: at most num_layers // p layers in bf16 at either end
    ("summary --preset gpt2 --fp8 tensorwise --fp8-16bit-layers 100 100", "first_layers_16bit=100 exceeds the 12"),
    ("summary --preset gpt2 --fp8 tensorwise --fp8-16bit-layers 1 7 --set p=2 d=1 n_micro=2",
     "last_layers_16bit=7 exceeds the 6"),
    # a day of 8 GPUs holds a fifth of one step of 10^9 sequences (it used to train 188 B tokens)
    ("plan --preset gpt2 --devices 8 --days 1 --global-batch 1000000000", "less than one step of the global batch"),
    # one output token has no inter-token gap for an ITL target to bound
    ("inference --preset llama-2-7b --set l_out=1 --slo-itl 0.01", "requests of l_out=1 have none"),
    # an address of no interface here (TEST-NET-1, RFC 5737) is the host's fault, not the port's
    ("serve --host 192.0.2.1 --port 8123", "192.0.2.1:8123: Cannot assign requested address (--host)"),
    # DeepFlow's seed system is one device with no links: data parallelism needs a system that has them
    ("lstm --from deepflow-lstm --dp 2", "--dp 2: deepflow-seed-002 (the system of --from deepflow-lstm) has no link"),
    # 10^10 FLOPs buy a model shallower than two layers: the optimum lies below the depths tried
    ("plan --budget-flops 1e10", "so the optimum is below them: choose a larger budget"),
    # a search that finds no layout says which rule left none (it used to blame --devices alone)
    ("search --hf-config {hf}/Mistral-7B-v0.1.json --devices 16 --global-batch 32 --seq 32768 --flash --cp 2,4",
     "context parallelism: ring context parallelism with a sliding window"),
    ("search --preset gpt2 --devices 13 --global-batch 64", "no micro-batch size of 1, 2, 4, 8 times a data-parallel"),
    # expert degrees of a model without experts: refused for what they are, as summary does
    ("inference --hf-config {hf}/Llama-3.1-8B.json --set ep=2", "ep applies to a mixture of experts, and Llama-3.1-8B"),
    ("inference --hf-config {hf}/Llama-3.1-8B.json --set etp=1 m1=2", "etp applies to a mixture of experts"),
    ("crossover --a mlp --b mlp", "--b mlp is the block --a names"),
    ("summary --preset gpt2 --schedule zb-h1", "--schedule zb-h1 schedules a pipeline, and p=1 has none"),
    # issue 17: user text that reached a Python-evaluating parser
    (f'summary --preset gpt2 --set "b={CODE}"', "--set b"),
    (f'formula --at "l={CODE}"', "--at l"),
    (f'formula --by "{CODE}"', "--by"),
    (f'sweep --preset gpt2 --grid b=1 --where "{CODE}"', "--where"),
    (f'sweep --preset gpt2 --grid "b={CODE}"', "--grid"),
    ('table --set "b=().__class__.__base__"', "--set b"),
    ('table --set "b=lambda: 1"', "--set b"),
    ('table --set "b=[x for x in (1,)]"', "--set b"),
    ('table --set "b=open(\'x\')"', "--set b"),
    ('table --set "b=b.__class__"', "--set b"),
    ('table --set "b=\'8\'"', "--set b"),
    ('table --set "b=globals()"', "--set b"),
    ('table --set "b=Symbol(\'x\')"', "--set b"),
    ('table --set "b=S(8)"', "--set b"),
    ('table --set "b=Integer(8)"', "--set b"),
    ('formula --set "e=exp(2)"', "--set e"),
    ('formula --set "e=1 if b else 2"', "--set e"),
    ('sweep --preset gpt2 --grid b=1 --where "memory_bytes.__class__"', "--where"),
    ('sweep --preset gpt2 --grid b=1 --where "memory_bytes[0] < 1"', "--where"),
    # issue 17: summary
    ("summary --preset gpt2 --set n_micro=-3", "--set n_micro"),
    ("summary --preset gpt2 --set n_micro=0", "--set n_micro"),
    ("summary --preset llama-2-7b --set p=64", "p must divide n_layers"),
    ("summary --preset gpt2 --set d=0", "--set d"),
    ("summary --preset gpt2 --set p=0", "--set p"),
    ("summary --preset gpt2 --set e=8192", "--set e"),
    ("summary --preset gpt2 --set n_layers=2", "--set n_layers"),
    # issue 17: sweep grids
    ("sweep --preset gpt2 --grid b=0", "--grid"),
    ("sweep --preset gpt2 --grid b=-1", "--grid"),
    ("sweep --preset gpt2 --grid b=1.5", "--grid"),
    ("sweep --preset gpt2 --grid b=nan", "--grid"),
    ("sweep --preset gpt2 --grid b=inf", "--grid"),
    ("sweep --preset gpt2 --grid d=0", "--grid"),
    ("sweep --preset gpt2 --grid m1=5", "m1 must divide h"),
    ("sweep --preset gpt2 --grid b=1:60000,1:60000", "b: 120,000 values, more than 100,000 an axis"),
    # what summary refuses at a point, sweep refuses at that point of its grid
    ("sweep --preset llama-3-70b --recompute full --recompute-layers 4 --flash --grid p=4,8 --set l=8192 m1=8 "
     "n_micro=8", "--grid at p=8: p x virtual_stages x recompute_layers must divide n_layers (got p x "
     "virtual_stages x recompute_layers=32, n_layers=80); full recomputation's uniform groups"),
    ("sweep --preset gpt2 --grid b=1,2 --set p=1 --schedule gpipe", "--schedule gpipe schedules a pipeline, and "
     "p=1 has none"),
    ("sweep --preset gpt2 --grid m1=2 s1=4", "s1 must divide m1"),
    ("sweep --preset gpt2 --grid p=5", "p must divide n_layers"),
    ("sweep --preset gpt2 --schedule interleaved --virtual-stages 3 --grid p=2,4 n_micro=4,6",
     "at p=4, n_micro=6: p must divide micro_batches"),
    ("sweep --preset gpt2 --schedule interleaved --virtual-stages 4 --grid p=2,4 n_micro=4",
     "at p=2: p x virtual_stages must divide n_layers"),
    ("sweep --preset gpt2 --grid b=1 --grid b=2", "--grid b"),
    ("sweep --preset gpt2 --grid b=1,2 --set b=4", "--set b"),
    ("sweep --preset gpt2 --grid b=1,2 --top 3", "--by"),
    ("sweep --preset gpt2 --grid b=1,2 --by total", "--top"),
    ("sweep --preset gpt2 --grid b=1,2 --top 0 --by total", "--top"),
    ("sweep --preset gpt2 --grid b=1,2 --top 3 --by compute --field total", "--by"),
    ("sweep --preset gpt2 --grid b=1,2 --top 3 --by speed", "--by"),
    # issue 17: search
    ("search --preset gpt2 --devices 8 --global-batch 0", "--global-batch"),
    ("search --preset gpt2 --devices 8 --global-batch -4", "--global-batch"),
    ("search --preset gpt2 --devices 8 --seq 0", "--seq"),
    ("search --preset gpt2 --devices 1000000000", "devices"),
    ("search --preset gpt2 --devices 8 --top -1", "--top"),
    # issue 17: element sizes, points, factors, self-reference, wrong types
    ("table --set es=-2", "--set es"),
    ("table --set es=0", "--set es"),
    ("table --set es_mask=-1", "--set es_mask"),
    ("formula --block mlp --at l=-5", "--at l"),
    ("formula --block mlp --by 1/0", "--by"),
    ("summary --preset gpt2 --set b=2*b", "--set b"),
    ("table --set l=True", "--set l"),
    ("table --set l=[1,2]", "--set l"),
    ("table --set l=l", "--set l"),
    ("table --set es=fp16", "--set es"),
    # issue 17: config files and output paths
    ("summary --hf-config {cfg}", "--hf-config"),
    ("summary --hf-config {cfg}/list.json", "config.json must be a JSON object"),
    ("summary --hf-config {cfg}/string.json", "config.json must be a JSON object"),
    ("summary --hf-config {cfg}/hidden_size_text.json", "hidden_size"),
    ("summary --hf-config {cfg}/true_layers.json", "num_hidden_layers"),
    ("summary --hf-config {cfg}/activation_int.json", "activation_function"),
    ("summary --hf-config {cfg}/tie_text.json", "tie_word_embeddings"),
    ("summary --hf-config {cfg}/attention_bias_5.json", "attention_bias"),
    ("sweep --preset gpt2 --grid b=1 --out {tmp}/missing/out.csv", "--out"),
    ("sweep --preset gpt2 --grid b=1 --out {tmp}/file.csv", "--out"),
    ("reproduce lbnl-2024 --reports {tmp}/file.csv", "--reports"),
    ("report --out {tmp}/file.csv", "--out"),
    # --set: names, pairs, numbers
    ("table --set q=3", "--set"),
    ("table --set m1", "--set"),
    ("table --set =4", "--set"),
    ("table --set b=", "--set"),
    ("table --set b=1 b=2", "--set b"),
    ("table --set b=0.5", "--set b"),
    ("table --set b=-0", "--set b"),
    ("table --set b=1e400", "--set b"),
    ("table --set b=10**40", "--set b"),
    ("table --set b=9**9**9", "--set b"),
    ("table --set b=2**b", "--set b"),
    ("table --set b=nan", "--set b"),
    ("table --set b=inf", "--set b"),
    ("table --set b=oo", "--set b"),
    ("table --set b=1j", "--set b"),
    ("table --set b=None", "--set b"),
    ("table --set b=7//2", "--set b"),
    ("table --set b=7%2", "--set b"),
    ("table --set b=1<2", "--set b"),
    ("table --set 'b=b and l'", "--set b"),
    ("table --set b=log(0)", "--set b"),
    ("table --set b=sqrt(-1)", "--set b"),
    ("table --set b=Mod(8,0)", "--set b"),
    ("table --set b=Max()", "--set b"),
    ("table --set b=floor", "--set b"),
    ("table --set 'b=(1,2)'", "--set b"),
    ("table --set 'b={1:2}'", "--set b"),
    ("table --set 'b=*l'", "--set b"),
    ("table --set b=l/3", "--set b"),
    ("table --set b=l l=b", "--set"),
    ("table --set 'b=" + "(" * 300 + "1" + ")" * 300 + "'", "--set b"),
    ("table --set b=" + "1+" * 600 + "1", "--set b"),
    ("table --set e=0", "--set e"),
    ("table --block attention --set e=100 h=3", "h must divide e"),
    ("table --block attention --set h=7", "h must divide e"),
    ("table --set m1=7", "m1 must divide f"),
    ("table --block attention --set m1=5", "m1 must divide h"),
    ("table --set m1=2 s1=4", "s1 must divide m1"),
    ("table --set s1=3 m1=3", "s1 must divide l"),
    ("table --set f=e/5", "--set f"),
    ("table --set d=8", "--set d"),
    ("table --set p=2", "--set p"),
    ("table --set n_micro=4", "--set n_micro"),
    ("table --set c=2", "--set c"),
    ("table --block mlp --set h=16", "--set h"),
    ("table --block attention --set f=64", "--set f"),
    ("table --block mlp --flash", "--flash"),
    ("table --block mlp --no-qkv-bias", "--no-qkv-bias"),
    ("table --preset llama-2-7b --set es_mask=1", "--set es_mask"),
    ("table --system tpu", "--system"),
    ("table --units furlongs", "--units"),
    ("table --format yaml", "--format"),
    ("table --block moe", "--block"),
    ("table --preset gpt5", "--preset"),
    ("table --conventions lbnl", "--conventions"),
    ("table --kernel-time magic", "--kernel-time"),
    ("table --precision fp8", "--precision"),
    ("table --bogus", "--bogus"),
    ("table --revision main", "--revision"),
    ("table --hf-config {cfg}/missing.json", "--hf-config"),
    ("table --preset gpt2 --hf-config {cfg}/list.json", "--hf-config"),
    # formula
    ("formula --field nope", "--field"),
    ("formula --row nope", "nope"),
    ("formula --at q=3", "--at"),
    ("formula --at l=0", "--at l"),
    ("formula --at l=2 l=3", "--at l"),
    ("formula --at d=4", "--at d"),
    ("formula --preset gpt2 --at l=4", "--at l"),
    ("formula --diff q", "--diff"),
    ("formula --diff d", "--diff d"),
    ("formula --elasticity p", "--elasticity p"),
    ("formula --leading q", "--leading"),
    ("formula --leading d", "--leading d"),
    ("formula --leading e --at l=4", "--leading"),
    ("formula --leading e --diff l", "--leading"),
    ("formula --remainder", "--remainder"),
    ("formula --by 0", "--by"),
    ("formula --by b//2", "--by"),
    ("formula --set b=2*b", "--set b"),
    ("formula --set b=l l=b", "--set"),
    ("formula --set b=l l=e e=b", "--set"),
    ("formula --field time --row nope", "nope"),
    ("formula --field ratio", "--field"),
    # crossover, optimize, scheme
    ("crossover --for q", "--for"),
    ("crossover --set l=4 --for l", "--for l"),
    ("crossover --a mlp --b moe", "--b"),
    ("crossover --set d=2", "--set d"),
    ("optimize --over q", "--over"),
    ("optimize --over d", "--over d"),
    ("optimize --set m1=2", "--set m1"),
    ("optimize --max 0", "--max"),
    ("optimize --max -5", "--max"),
    ("optimize --block nope", "--block"),
    ("scheme --scheme nope", "--scheme"),
    ("scheme --scheme ulysses --set c=8", "--set c"),
    ("scheme --scheme megatron-sp --set s1=2", "--set s1"),
    ("scheme --no-causal", "--no-causal"),
    ("scheme --contiguous", "--contiguous"),
    ("scheme --scheme ring-attention --flash", "--flash"),
    ("scheme --set s1=0", "--set s1"),
    ("scheme --scheme ring-attention --set c=-1", "--set c"),
    # summary and profile
    ("summary --zero 4", "--zero"),
    ("summary --zero -1", "--zero"),
    ("summary --zero one", "--zero"),
    ("summary --preset gpt2 --set b=1.5", "--set b"),
    ("summary --preset gpt2 --set l=0", "--set l"),
    ("summary --preset gpt2 --set m1=5", "m1 must divide h"),
    ("summary --preset gpt2 --set m1=4 s1=8", "s1 must divide m1"),
    ("summary --preset gpt2 --set es=1", "--set es"),
    ("summary --preset gpt2 --set v=100", "--set v"),
    ("summary --preset gpt2 --set h=4", "--set h"),
    ("summary --preset gpt2 --set b=l l=b", "--set"),
    ("summary --preset gpt2 --recompute-layers 0", "--recompute-layers"),
    ("summary --preset gpt2 --recompute-layers 2", "recompute_layers"),
    ("summary --preset gpt2 --recompute-method block", "recompute_method"),
    ("summary --preset gpt2 --virtual-stages 0", "--virtual-stages"),
    ("summary --preset gpt2 --virtual-stages 2", "virtual stages"),
    ("summary --preset gpt2 --schedule zigzag", "--schedule"),
    ("summary --preset gpt2 --recompute some", "--recompute"),
    ("summary --preset gpt2 --set p=4 n_micro=4 --schedule interleaved --virtual-stages 5", "virtual_stages"),
    ("summary --preset gpt2 --set p=4 n_micro=2 --schedule interleaved --virtual-stages 3", "p must divide"),
    ("summary --preset gpt2 --set p=2 --recompute full --recompute-method block --recompute-layers 7",
     "recompute_layers"),
    ("summary --preset gpt2 --json --units si", "--units"),
    ("summary --preset gpt2 --system tpu", "--system"),
    ("summary --preset gpt2 --hf-config x.json", "--hf-config"),
    ("summary --revision main", "--revision"),
    ("profile --preset gpt2 --depth -2", "--depth"),
    ("profile --preset gpt2 --top 0", "--top"),
    ("profile --preset gpt2 --set q=1", "--set"),
    ("profile --preset gpt2 --set b=0", "--set b"),
    # sweep
    ("sweep --preset gpt2", "--grid"),
    ("sweep --preset gpt2 --grid q=1", "--grid"),
    ("sweep --preset gpt2 --grid e=8", "--grid"),
    ("sweep --preset gpt2 --grid b", "--grid"),
    ("sweep --preset gpt2 --grid b=", "--grid"),
    ("sweep --preset gpt2 --grid b=1,,2", "--grid"),
    ("sweep --preset gpt2 --grid b=1e400", "--grid"),
    ("sweep --preset gpt2 --grid b=x", "--grid"),
    ("sweep --preset gpt2 --grid b=2*b", "--grid"),
    ("sweep --preset gpt2 --grid l=3 --set m1=2 s1=2", "--grid"),
    ("sweep --preset gpt2 --grid m1=1,2,4 --set s1=m1/2", "--grid"),
    ("sweep --preset gpt2 --grid b=1 --set l=l", "l"),
    ("sweep --preset gpt2 --grid b=1 --field nope", "--field"),
    ("sweep --preset gpt2 --grid b=1 --where 'memory_bytes'", "--where"),
    ("sweep --preset gpt2 --grid b=1 --where 'nope <= 3'", "--where"),
    ("sweep --preset gpt2 --grid b=1 --where 'memory_bytes is 3'", "--where"),
    ("sweep --preset gpt2 --grid b=1 --where 'memory_bytes <= 1/0'", "--where"),
    ("sweep --preset gpt2 --grid b=1 --chunk 0", "--chunk"),
    ("sweep --preset gpt2 --grid b=1 --out {tmp}", "--out"),
    ("sweep --preset gpt2 --grid b=1 --out {tmp}/out.txt", "--out"),
    ("sweep --preset gpt2 --grid b=1 --overwrite", "--overwrite"),
    ("sweep --preset gpt2 --grid " + " ".join(f"{n}=" + ",".join(map(str, range(1, 40)))
                                              for n in ("b", "d", "n_micro", "l", "p", "m1")), "--grid"),
    # search
    ("search --preset gpt2", "--devices"),
    ("search --preset gpt2 --devices 0", "--devices"),
    ("search --preset gpt2 --devices -8", "--devices"),
    ("search --preset gpt2 --devices 8.5", "--devices"),
    ("search --preset gpt2 --devices eight", "--devices"),
    ("search --preset gpt2 --devices 99999999999999999999", "--devices"),
    ("search --preset gpt2 --devices 8 --top 0", "--top"),
    ("search --preset gpt2 --devices 8 --seq -1", "--seq"),
    ("search --preset gpt2 --devices 8 --system a100-perlmutter --zero 4", "--zero"),
    ("search --preset gpt2 --devices 11 --global-batch 3", "devices"),   # 11 stages would need 18 layers
    # inference
    ("inference --preset llama-2-7b --grid b=nan", "--grid"),
    ("inference --preset llama-2-7b --grid b=0", "--grid"),
    ("inference --preset llama-2-7b --grid b=1 --grid b=2", "--grid b"),
    ("inference --preset llama-2-7b --grid b=1,2 --set b=4", "--set b"),
    ("inference --preset llama-2-7b --set b=0", "--set b"),
    ("inference --preset llama-2-7b --set l_in=2*l_in", "--set l_in"),
    # lstm, reproduce, report, top level
    ("lstm", "--batch"),
    ("lstm --batch 0 --steps 20 --hidden 64 --vocab 100 --layers 2", "--batch"),
    ("lstm --batch 4 --steps -1 --hidden 64 --vocab 100 --layers 2", "--steps"),
    ("lstm --batch 4 --steps 2 --hidden 64 --vocab 100 --layers 2 --element-bytes 0", "--element-bytes"),
    ("lstm --batch 4 --steps 2 --hidden 64 --vocab 100 --layers 2 --dp 0", "--dp"),
    ("lstm --from nope", "--from"),
    ("lstm --batch 4 --steps 2 --hidden 64 --vocab 100 --layers 2 --projection 8", "--projection"),
    ("reproduce nope", "nope"),
    ("summary --preset gpt2 --set l_dec=114", "l_dec is the decoder length of an encoder-decoder"),
    ("summary --preset gpt2 --no-mtp", "--no-mtp: gpt2 has no multi-token-prediction modules"),
    ("summary --preset gpt2 --set p=4 n_micro=8 --first-stage-layers 40", "(--first-stage-layers)"),
    ("summary --preset gpt2 --set p=4 n_micro=8 --recompute full --recompute-layers 5", "(--recompute-layers)"),
    ("summary --preset gpt2 --recompute-layers 2", "(--recompute-layers)"),
    ("sweep --preset gpt2 --grid b=1,2 --no-mtp", "--no-mtp"),
    ("summary --hf-config {hf}/t5-small.json --set l_dec=0", "l_dec"),
    ("formula --block mlp --field flops_fwd --system a100", "--system"),
    ("formula --block mlp --layer-group 2", "--layer-group"),
    ("table --hf-config {hf}/gemma-2-2b.json --block attention --layer-group 3", "--layer-group 3"),
    ("table --preset gpt2 --block mlp --tensor 2d --set m1=2 m2=2 --layer-group 1", "--layer-group"),
    ("formula --block mlp --field weights --kernel-time tiled", "--kernel-time"),
    ("crossover --set f=4*e m1=1 s1=1 --field act_buffer --system h200", "--system"),
    ("optimize --preset gpt2 --field flops_fwd --system a100", "--system"),
    ("inference --hf-config {hf}/Mixtral-8x7B-v0.1.json --set m1=4 ep=2 etp=1", "ep x etp must equal m1"),
    ("inference --hf-config {hf}/Mixtral-8x7B-v0.1.json --set m1=4 ep=3", "ep must divide m1"),
    # DeepSeek-V3's ranks are enumerated (dense and MoE layers): the rule names what it counts
    ("summary --hf-config {hf}/DeepSeek-V3.json --set m1=8 s1=8 ep=8 p=16 n_micro=32",
     "p=16 must divide n_layers=61 (Megatron splits them evenly; first_stage_layers and last_stage_layers"),
    ("summary --hf-config {hf}/DeepSeek-V3.json --set m1=8 s1=8 ep=8 p=16 n_micro=32 --embedding-in-split",
     "p=16 must divide n_layers=61 plus one slot for the embedding counted as a layer (62 slots)"),
    ("summary --hf-config {hf}/DeepSeek-V3.json --set m1=8 s1=8 ep=8 p=2 n_micro=32 --embedding-in-split "
     "--loss-in-split", "p=2 must divide n_layers=61 plus one slot each for the embedding and the loss counted as "
     "layers (63 slots)"),
    ("search --hf-config {hf}/gpt-oss-20b.json --devices 64 --global-batch 128 --tensor 2d",
     "a tensor grid does not model head_dim, rotary_dim, window, sinks, moe; add 1d to tensor (--tensor)"),
    ("summary --hf-config {cfg}/deep.json", "num_hidden_layers must be at most 1,000,000"),
    ("summary --hf-config {cfg}/llama4.json", "the language model is its text_config (model_type 'llama4_text')"),
    ("reproduce --reports {tmp}/missing/deeper", "--reports"),
    ("report --out {tmp}/missing/deeper", "--out"),
    ("nope", "nope"),
    ("", "COMMAND"),
    # found by a fuzz of hostile input (issue 66)
    ("sweep --preset gpt2 --grid b=1 --dask 100000", "--dask 100000: a LocalCluster of more worker processes"),
    ("plan --devices 8 --days 30 --price 1e308 --json", "price=1.000E+308 is too large"),
    ("inference --preset llama-2-7b --rate 1e-15 --json", "--rate must be at least 0.0001 requests/s"),
    ("search --preset gpt2 --devices 8 --global-batch 8 --seq 4096", "give a --seq within it (search keeps"),
    ("plan --preset gpt2 --devices 64 --tokens 1e12 --seq 8192", "give a --seq within it (plan keeps"),
    ("lstm --from deepflow-lstm --system h100 --kernel-time roofline", "--kernel-time"),    # always tiled
    # an option given twice: argparse kept the last, silently
    ("summary --preset gpt2 --preset llama-2-7b", "--preset given twice"),
    ("summary --preset gpt2 --flash --no-flash", "--flash and --no-flash both given"),
    ("search --preset gpt2 --devices 8 --devices=4", "--devices given twice"),
    ("inference --preset gpt2 --kv-dtype fp8 --kv-dtype int4", "--kv-dtype given twice"),
    # typed at their defaults, where nothing reads them: refused as they are away from their defaults
    ("summary --preset llama-2-7b --recompute-method uniform", "--recompute-method applies to --recompute full"),
    ("summary --preset gpt2 --reshard-after-forward", "--reshard-after-forward applies to --zero 3"),
    ("summary --preset gpt2 --json --units gib", "--units does not apply to --json"),
    ("summary --preset llama-2-7b --precision fp32 --no-master-weights", "fp32 keeps none"),
    ("summary --preset llama-2-7b --schedule interleaved --virtual-stages 2", "p=1 has no pipeline to interleave"),
    ("scheme --scheme ring-attention --no-causal --contiguous", "--contiguous does not apply with --no-causal"),
    ("summary --hf-config {cfg}/mtp.json --json", "num_nextn_predict_layers must be at most 64"),
    ("formula --block mlp --field flops_fwd --by b*(l+1)", "--by factors out a monomial"),
    ("formula --block mlp --field flops_fwd --diff b --elasticity b", "--diff and --elasticity together"),
    ("plan --budget-flops 1e25 --plot {tmp}/isoflop.txt", "--plot must end in .png or .pdf or .svg"),
    ("inference --preset llama-3-8b --disaggregate 10000000:1 --slo-ttft 1", "must be at most 4,096"),
    ("inference --preset llama-3-8b --disaggregate ²:1 --slo-ttft 1", "--disaggregate takes P:D"),
    ("inference --preset llama-3-8b --set l_ctx=4", "l_ctx=4 is fewer cached tokens than the prompt's l_in=512"),
    ("plan --preset llama-2-7b --devices 256 --days 14 --seq 4096 --shape deepseek-v3", "--shape is the family"),
    ("sweep --preset gpt2 --grid b=1 --field total,total", "total named twice"),
    ("profile --preset gpt2 --system h100 --set b=4 l=128", "--system does not change the parameters and MACs"),
    ("profile --preset gpt2 --set b=4 l=128 p=2", "--set p: it does not change the parameters and MACs"),
    ("profile --preset gpt2 --overlap grad --set b=4 l=128", "--overlap does not change the parameters and MACs"),
    ("summary --preset llama-2-7b --lora-rank 1000000", "lora rank 1000000 exceeds the hidden size e=4096"),
    ("summary --hf-config {cfg}/digits.json", "--hf-config: digits.json holds a number of more than 4,300 digits"),
    ("inference --preset gpt2 --system-file {cfg}/endless.json --json", "hbm_capacity must be within a double's"),
    ("summary --preset gpt2 --system-file {cfg}/half_domain.json", "nvlink_size counts devices, a whole number"),
    ("summary --preset gpt2 --system-file {cfg}/digits.json", "digits.json: holds a number of more than 4,300"),
]


def _write_configs(folder: pathlib.Path) -> None:
    """The config files of the corpus (and ``missing.json``, which is never written)."""
    folder.mkdir(exist_ok=True)
    files = {"list.json": [1, 2], "string.json": "llama", "hidden_size_text.json": {**LLAMA, "hidden_size": "4096"},
             "true_layers.json": {**LLAMA, "num_hidden_layers": True},
             "activation_int.json": {**GPT2, "activation_function": 3},
             "tie_text.json": {**LLAMA, "tie_word_embeddings": "false"},
             "attention_bias_5.json": {**LLAMA, "attention_bias": 5},
             "llama4.json": {"model_type": "llama4", "text_config": {"model_type": "llama4_text"}},
             "deep.json": {**LLAMA, "num_hidden_layers": 10**12},
             "mtp.json": {**json.loads((pathlib.Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json").read_text()),
                          "num_nextn_predict_layers": 10**6}}
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    h100 = json.loads((pathlib.Path(__file__).parents[1] / "symbolic_cost" / "timing" / "system_files" / "h100.json")
                      .read_text())
    (folder / "half_domain.json").write_text(json.dumps({**h100, "name": "mine", "nvlink_size": 2.5}))
    (folder / "endless.json").write_text(json.dumps({**h100, "name": "mine", "hbm_capacity": "1e400"}))
    # an integer of 5,001 digits: Python's JSON reader refuses it with its own message (sys.set_int_max_str_digits)
    (folder / "digits.json").write_text('{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}")


@pytest.fixture
def places(tmp_path):
    cfg, tmp = tmp_path / "cfg", tmp_path / "tmp"
    _write_configs(cfg)
    tmp.mkdir()
    (tmp / "file.csv").write_text("b\n1\n")
    return {"cfg": str(cfg), "tmp": str(tmp)}


def run_cli(argv, capsys):
    """``main(argv)``'s exit status, stdout and stderr."""
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("line, named", CLI, ids=[line[:70] for line, _ in CLI])
def test_cli_refuses_with_one_line_naming_the_argument(line, named, places, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")
    line = line.replace("{cfg}", places["cfg"]).replace("{tmp}", places["tmp"])
    argv = shlex.split(line.replace("{hf}", str(pathlib.Path(__file__).parent / "hf_configs")))
    status, out, err = run_cli(argv, capsys)
    assert status == 2, (status, out[:300], err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert named in err, err
    assert not out


def test_no_command_line_runs_code(places, capsys, tmp_path):
    """The reader admits no call, attribute or import: a would-be payload leaves no trace."""
    marker = tmp_path / "ran"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    for argv in (["table", "--set", f"b={payload}"], ["formula", "--at", f"l={payload}"],
                 ["formula", "--by", payload], ["sweep", "--preset", "gpt2", "--grid", "b=1", "--where", payload],
                 ["crossover", "--set", f"f={payload}"], ["summary", "--set", f"b={payload}"]):
        assert main(argv) == 2
    assert not marker.exists()
    capsys.readouterr()


def test_a_config_without_a_context_length_says_which_it_uses(tmp_path, capsys):
    """Issue 17: a valid config without max_position_embeddings gave a misleading 'got 0'; the
    sequence length is then the documented 2048."""
    config = dict(LLAMA)
    config.pop("max_position_embeddings")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    status, out, err = run_cli(["summary", "--hf-config", str(path)], capsys)
    assert status == 0 and not err and " l=2048 " in out


def test_an_internal_error_is_one_line_asking_for_a_report(monkeypatch, capsys):
    from symbolic_cost.cli import table

    def broken(args):
        raise RuntimeError("something\nwent wrong")
    monkeypatch.setattr(table, "run", broken)
    status, out, err = run_cli(["table"], capsys)
    assert status == 3 and not out
    assert err.count("\n") == 1 and "internal error" in err and "report" in err and "Traceback" not in err


def test_output_files_are_not_overwritten_unless_asked(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    assert run_cli(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--out", str(out)], capsys)[0] == 0
    first = out.read_text()
    assert run_cli(["sweep", "--preset", "gpt2", "--grid", "b=1,2", "--out", str(out)], capsys)[0] == 2
    assert run_cli(["sweep", "--preset", "gpt2", "--grid", "b=3", "--out", str(out), "--overwrite"], capsys)[0] == 0
    assert out.read_text() != first and len(out.read_text().splitlines()) == 2


def test_sweep_points_that_follow_a_swept_symbol(capsys):
    """``--set s1=m1`` follows the swept ``m1`` (it used to take m1's default of 1).  (Llama's
    vocabulary needs no padding to a multiple of m1, which the sweep's symbolic m1 leaves out.)"""
    status, out, _ = run_cli(["sweep", "--preset", "llama-2-7b", "--grid", "m1=1,2,4", "--set", "s1=m1",
                              "--field", "activation_bytes"], capsys)
    assert status == 0
    rows = [line.split(",") for line in out.splitlines()[1:]]
    arch = preset("llama-2-7b")
    assert len(rows) == 3
    for m1_text, value in rows:
        degree = int(float(m1_text))
        expected = model_cost(arch, Training(b=1, l=4096, m1=degree, s1=degree)).activation_bytes
        assert float(value) == pytest.approx(float(expected))


# ---------------------------------------------------------------------------------------------
# The API corpus: (call, exception type, fragment naming the argument).
# ---------------------------------------------------------------------------------------------

GPT2_ARCH = preset("gpt2")
ARCH = dict(name="x", n_layers=2, e=64, h=4, f=256, vocab=100)

API = [
    # issue 17: builders
    (lambda: mlp(float("nan"), 8, 8, 32), InputError, "b must be finite"),
    (lambda: mlp(None, 8, 8, 32), InputTypeError, "b must be a number"),
    (lambda: mlp(True, 8, 8, 32), InputTypeError, "b must be a number"),
    (lambda: mlp("abc", 8, 8, 32), InputTypeError, "b must be a number"),
    (lambda: mlp(1, 8, 64, 256, run=Run(es="fp16")), InputTypeError, "es must be a number"),
    (lambda: mlp(1, 8, 64, 256, run=Run(es=-2)), InputError, "es must be positive"),
    (lambda: mlp(1, 8, 64, 256, run=Run(es=0)), InputError, "es must be positive"),
    (lambda: mlp(1, 8, 64, 256, run=Run(es_mask=-1)), InputError, "es_mask must be positive"),
    (lambda: mlp(1, 8, 64, 256, run=Run(es=float("inf"))), InputError, "es must be finite"),
    (lambda: mlp(float("inf"), 8, 8, 32), InputError, "b must be finite"),
    (lambda: mlp(1, 8, 64, 256, m1=True), InputTypeError, "m1 must be a number"),
    (lambda: mlp([1], 8, 64, 256), InputTypeError, "b must be a number"),
    (lambda: mlp({}, 8, 64, 256), InputTypeError, "b must be a number"),
    (lambda: mlp(1 + 2j, 8, 64, 256), InputTypeError, "b must be a real number"),
    (lambda: mlp(1, 8, 64, 256.5), InputError, "f must be exact"),
    (lambda: mlp(1, 8, 64, Rational(1, 2)), InputError, "f must be a positive integer"),
    (lambda: mlp(1, -8, 64, 256), InputError, "l must be a positive integer"),
    (lambda: mlp(1, 8, 64, 256, 3), InputError, "m1 must divide f"),
    (lambda: mlp(1, 8, 64, 256, 2, 4), InputError, "s1 must divide m1"),
    (lambda: mlp(1, 8, 64, 256, run=Run(conventions="nope")), ValueError, "unknown conventions 'nope'"),
    (lambda: attention(1, 8, 64, 0), InputError, "h must be a positive integer"),
    (lambda: attention(1, 8, 64, 5), InputError, "h must divide e"),
    (lambda: attention(1, 8, 64, 4, 3), InputError, "m1 must divide h"),
    (lambda: attention("1", 8, 64, 4), InputTypeError, "b must be a number"),
    (lambda: transformer_layer(1, 8, 64, -1, 4), InputError, "f must be a positive integer"),
    (lambda: transformer_layer(1, 8, 64, 256, 4.5), InputError, "h must be exact"),
    (lambda: transformer_layer(1, 8, 64, 256, None), InputTypeError, "h must be a number"),
    (lambda: mlp(b, l, e, f).subs({b: 0}), InputError, "b must be a positive integer"),
    (lambda: mlp(b, l, e, f).subs({b: "2"}), InputTypeError, "b must be a number"),
    (lambda: mlp(b, l, e, f).subs({"b": float("nan")}), InputError, "b must be finite"),
    (lambda: mlp(b, l, e, f).subs({"heads": 4}), InputError, "unknown symbol name 'heads'"),
    (lambda: mlp(b, l, e, f, m1).subs({f: 10, m1: 4}), InputError, "m1 must divide f"),
    # exact, the reader
    (lambda: exact("4*e", "f"), InputTypeError, "f must be a number"),
    (lambda: exact(float("nan"), "x"), InputError, "x must be finite"),
    (lambda: exact(object(), "x"), InputTypeError, "x must be a number"),
    (lambda: exact((1, 2), "x"), InputTypeError, "x must be a number"),
    (lambda: read("__import__('os')", argument="formula"), InputError, "formula"),
    (lambda: read("b.real", argument="formula"), InputError, "formula"),
    (lambda: read("1/0", argument="x"), InputError, "x: division by zero"),
    (lambda: read("q", argument="x"), InputError, "x: unknown name 'q'"),
    (lambda: read("b < 2", argument="x"), InputError, "x: a comparison"),
    (lambda: read("b + 1", argument="where", condition=True), InputError, "where"),
    (lambda: read(4, argument="x"), InputError, "x must be text"),
    (lambda: read("", argument="x"), InputError, "x: nothing to read"),
    (lambda: read("x" * 2000, argument="x"), InputError, "x: text longer"),
    (lambda: read_number("b", argument="x"), InputError, "x must be a number"),
    # Training
    (lambda: Training(b=0), InputError, "b must be a positive integer"),
    (lambda: Training(l=-1), InputError, "l must be a positive integer"),
    (lambda: Training(micro_batches=-3), InputError, "micro_batches must be a positive integer"),
    (lambda: Training(micro_batches=0), InputError, "micro_batches must be a positive integer"),
    (lambda: Training(d=0), InputError, "d must be a positive integer"),
    (lambda: Training(p=0), InputError, "p must be a positive integer"),
    (lambda: Training(p=1.5), InputError, "p must be exact"),
    (lambda: Training(b="8"), InputTypeError, "b must be a number"),
    (lambda: Training(zero=True), InputError, "zero must be one of"),
    (lambda: Training(zero=4), InputError, "zero must be one of"),
    (lambda: Training(flash=1), InputTypeError, "flash must be True or False"),
    (lambda: Training(distributed_optimizer="yes"), InputTypeError, "distributed_optimizer must be True or False"),
    (lambda: Training(mask_bytes=0), InputError, "mask_bytes must be positive"),
    (lambda: Training(recompute_layers=2), InputError, "recompute_layers"),
    (lambda: Training(recompute="full", recompute_layers=0), InputError, "recompute_layers must be a positive"),
    (lambda: Training(precision="fp8"), ValueError, "precision must be one of"),
    (lambda: Training(schedule="zigzag"), ValueError, "schedule must be one of"),
    (lambda: Training(recompute="some"), ValueError, "recompute must be one of"),
    # Architecture
    (lambda: Architecture(**{**ARCH, "e": 0}), InputError, "e must be a positive integer"),
    (lambda: Architecture(**{**ARCH, "h": 5}), InputError, "h must divide e"),
    (lambda: Architecture(**{**ARCH, "kv_heads": 3}), InputError, "kv_heads must divide h"),
    (lambda: Architecture(**{**ARCH, "vocab": None}), InputTypeError, "vocab must be a number"),
    (lambda: Architecture(**{**ARCH, "n_layers": "2"}), InputTypeError, "n_layers must be a number"),
    (lambda: Architecture(**{**ARCH, "e": float("nan")}), InputError, "e must be finite"),
    (lambda: Architecture(**{**ARCH, "positions": -1}), InputError, "positions must be a non-negative"),
    (lambda: Architecture(**{**ARCH, "tied": "false"}), InputTypeError, "tied must be True or False"),
    (lambda: Architecture(**{**ARCH, "bias": 5}), InputTypeError, "bias must be True or False"),
    (lambda: Architecture(**{**ARCH, "mlp_bias": 1}), InputTypeError, "mlp_bias must be True or False"),
    (lambda: Architecture(**{**ARCH, "name": 3}), InputTypeError, "name must be text"),
    (lambda: Architecture(**{**ARCH, "mlp": "tanh"}), ValueError, "mlp must be one of"),
    # config loading
    (lambda: from_config([1, 2]), InputTypeError, "config.json must be a JSON object"),
    (lambda: from_config("llama"), InputTypeError, "config.json must be a JSON object"),
    (lambda: from_config({"model_type": 3}), ValueError, "model_type 3 is not supported"),
    (lambda: from_config({**LLAMA, "hidden_size": "4096"}), ValueError, "hidden_size must be a positive integer"),
    (lambda: from_config({**LLAMA, "hidden_size": 2**60}), ValueError, "hidden_size must be at most"),
    (lambda: from_config({**LLAMA, "num_hidden_layers": True}), ValueError, "num_hidden_layers"),
    (lambda: from_config({**GPT2, "activation_function": 3}), ValueError, "activation_function"),
    (lambda: from_config({**LLAMA, "tie_word_embeddings": "false"}), ValueError, "tie_word_embeddings"),
    (lambda: from_config({**LLAMA, "attention_bias": 5}), ValueError, "attention_bias"),
    (lambda: from_config({**LLAMA, "attention_dropout": float("nan")}), ValueError, "attention_dropout"),
    (lambda: from_config({**LLAMA, "attention_dropout": float("inf")}), ValueError, "attention_dropout"),
    (lambda: from_config({**LLAMA, "rope_scaling": "linear"}), ValueError, "rope_scaling must be an object"),
    (lambda: load(PACKAGE), InputError, "--hf-config"),
    (lambda: load(PACKAGE / "no-such-config.json"), ValueError, "--hf-config"),
    (lambda: preset("gpt5"), ValueError, "unknown preset 'gpt5'"),
    # whole models
    (lambda: model_cost(GPT2_ARCH, Training(b=1, l=1024, p=5)), InputError, "p must divide n_layers"),
    (lambda: model_cost(GPT2_ARCH, Training(b=1, l=1024, p=24)), InputError, "p must divide n_layers"),
    (lambda: model_cost(GPT2_ARCH, Training(b=1, l=1024, m1=5)), InputError, "m1 must divide h"),
    (lambda: model_cost(GPT2_ARCH, Training(b=1, l=1024, m1=2, s1=4)), InputError, "s1 must divide m1"),
    # sweep and search
    (lambda: sweep({"w": 2 * b}, grid={"b": ["a"]}), InputTypeError, "grid b must be a list of numbers"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [0, 1]}), InputError, "grid b must be positive integers"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [math.nan]}), InputError, "grid b"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [1.5]}), InputError, "grid b"),
    (lambda: sweep({"w": 2 * b}, grid={"b": []}), InputError, "grid b must be a non-empty list"),
    (lambda: sweep({"w": 2 * b}, grid={"q": [1]}), InputError, "unknown symbol name 'q'"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [1]}, constraints=[CODE]), InputError, "constraints"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [1]}, chunk_size=0), InputError, "chunk_size"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [1]}, out="/no/such/folder/x.csv"), InputError, "out"),
    # a symbol the grid does not give ended in NameError; the imaginary unit was printed as 0
    (lambda: sweep({"w": 2 * b * Symbol("x")}, grid={"b": [1]}), InputError, "expression 'w' holds x, for which"),
    (lambda: sweep({"w": I * b}, grid={"b": [1, 2]}), InputError, "expression 'w' is complex"),
    (lambda: compile_exprs({"w": b + e}, symbols=["b"]), InputError, "expression 'w' holds e, for which"),
    # an output named as an input replaced its column; "b" beside b dropped one axis; 2**53 + 1 came out 2**53
    (lambda: sweep({"b": 2 * m1}, grid={"b": [1, 2], "m1": [3]}), InputError, "exprs names b, an input"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [1], b: [2]}), InputError, "grid names a symbol twice"),
    (lambda: sweep({"w": 2 * b}, grid={"b": [2**53 + 1]}), InputError, "below 2**53"),
    # a symbol is a SymPy Boolean too: it reached numpy's select as a condition; rows of text, a TypeError
    (lambda: sweep({"w": 2 * b}, grid={"b": [1, 2]}, constraints=[b]), InputTypeError, "must be a condition"),
    (lambda: compile_exprs({"w": 2 * b}, rows="x"), InputTypeError, "rows must be a whole number"),
    (lambda: search(GPT2_ARCH, 0), InputError, "devices"),
    (lambda: search(GPT2_ARCH, 10**9), InputError, "devices"),
    (lambda: search(GPT2_ARCH, "8"), InputTypeError, "devices"),
    (lambda: search(GPT2_ARCH, True), InputTypeError, "devices"),
    (lambda: search(GPT2_ARCH, 8, global_batch=0), InputError, "global_batch"),
    (lambda: search(GPT2_ARCH, 8, global_batch=-4), InputError, "global_batch"),
    (lambda: search(GPT2_ARCH, 8, seq=0), InputError, "seq"),
    (lambda: search(GPT2_ARCH, 8, top=-1), InputError, "top"),
    (lambda: search(GPT2_ARCH, 8, zero=(1, 5)), InputError, "zero"),
    (lambda: search(GPT2_ARCH, 8, offload=("disk",)), InputError, "offload"),
    (lambda: search(GPT2_ARCH, 8, schedules=("zero-bubble",)), InputError, "schedules"),
    (lambda: search(GPT2_ARCH, 1, global_batch=8, schedules=("interleaved",)), InputError,
     "no layout of gpt2 on 1 devices with global batch 8 runs the schedules interleaved"),    # p = 1 only
    (lambda: search(GPT2_ARCH, 8, recompute_layers="some"), InputError, "recompute_layers"),
    (lambda: search(GPT2_ARCH, 8, micro_batch_sizes="many"), InputError, "micro_batch_sizes"),
    (lambda: search(GPT2_ARCH, 8, micro_batch_sizes=(1, 0)), InputError, "micro_batch_sizes"),
    (lambda: search(GPT2_ARCH, 8, sequence="most"), InputError, "sequence"),
    (lambda: search(GPT2_ARCH, 8, workers=0), InputError, "workers"),
    # analysis by name, conventions
    (lambda: analysis.derivative(b * l, "q"), InputError, "unknown symbol name 'q'"),
    (lambda: analysis.leading_terms(b * l, ["q"]), InputError, "unknown symbol name 'q'"),
    (lambda: analysis.leading_terms(b * l**(10**9) + l, [l]), InputError, "expands powers up to 100"),
    (lambda: conv.get("nope"), ValueError, "unknown conventions 'nope'"),
    (lambda: conv.DEFAULT.but(matmul_flops="3mnk"), ValueError, "matmul_flops must be one of"),
    # a probe of the serving and analysis API (2026-11-30): each was a raw exception, a hang or a silent answer
    (lambda: _between_steps()("m1**2", m1), InputTypeError, "expr must be a number or a SymPy expression"),
    (lambda: _plan()(10**24, depths=range(1, 10**9)), InputError, "depths must hold at most 4,096"),      # hung
    (lambda: _serving().layouts(2**40), InputError, "devices must be an integer from 1 to 4,096"),      # MemoryError
    (lambda: _rank(level=91), InputError, "the SLO's percentile must be one of 50, 90, 99, got 91"),    # was "left out"
    (lambda: _rank(slo=(0, 0)), InputError, "slo's time to first token must be a positive number"),
    (lambda: _rank(effort=_effort(0)), InputError, "requests must be an integer between 1 and 100,000"),
    (lambda: _rank(system="zz"), InputError, "unknown system 'zz'"),
    (lambda: _rank(runtime_of="x"), InputTypeError, "runtime_of must be a function"),
    (lambda: _rank(runtime_of=lambda step, m1: 5), InputTypeError, "runtime_of must give a load.Runtime"),
    (lambda: _rank(serving=None), InputTypeError, "serving must be a Serving"),
    (lambda: _rank(arch=None), InputTypeError, "arch must be an Architecture"),
    (lambda: _load().capacity(lambda n: 0), InputError, "burst_throughput(128) must be a positive, finite number"),
    (lambda: _load().capacity(lambda n: float("nan")), InputError, "burst_throughput(128) must be a positive"),
    (lambda: _load().capacity(5), InputTypeError, "burst_throughput must be a function"),
    (lambda: _load().percentile([(1, 1)], "50"), InputError, "q must be a percentile from 0 to 100"),
    (lambda: _load().percentile(None, 50), InputTypeError, "pairs must be (value, count) pairs"),
    (lambda: _load().Runtime(step_overhead=10**400), InputError, "step_overhead must be within a double's range"),
    (lambda: _load().serve(_TextStep(), 5, None, requests=2), InputError, "a step's price must be a number"),
    (lambda: _disaggregated(_TextStep()), InputError, "a step's price must be a number"),    # was a TypeError
    (lambda: _disaggregated(_TextStep(), transfer=None), InputTypeError, "step must be a StepModel (inference.load"),
    (lambda: sweep({"w": b * float("nan")}, grid={"b": [1]}), InputError, "exprs['w'] must be a real number"),
    (lambda: _serving().kv_transfer(None), InputTypeError, "step must be a StepModel"),
    (lambda: _plan_table()(None, 10**24), InputTypeError, "chosen must be a Plan"),
    (lambda: analysis.valid_values(None, m1, 10), InputTypeError, "block must be a block's or a layer's cost"),
    (lambda: _h100().but(efficiency="fast"), InputTypeError, "efficiency must be a timing.efficiency.Efficiency"),
    (lambda: _h100().but(name=5), InputTypeError, "a system's name must be text"),
    (lambda: Training(b=10**30, l=1024), InputError, "b must be at most 2**53"),    # a step of 10^27 s
    # a fourth probe: the blocks' and the kernels' own arguments
    (lambda: attention(8, 128, 64, _heads(8, rotary=True, rotary_dim=1000)), InputError,
     "rotary_dim=1000 exceeds the head size q=8"),                         # 125 times the rotation, silently
    (lambda: mlp(8, 128, 64, 256, gated_act="no"), InputTypeError, "gated_act must be True or False"),  # read as True
    (lambda: mlp(8, 128, 64, 256, activation_dropout=2), InputTypeError, "activation_dropout must be True or False"),
    (lambda: mlp(8, 128, 64, 256, run="flash"), InputTypeError, "run must be a Run"),        # AttributeError
    (lambda: attention(8, 128, 64, 8, scores=5), InputTypeError, "scores must be a Scores"),
    (lambda: transformer_layer(8, 128, 64, 256, 8, wiring=Run()), InputTypeError, "wiring must be a Wiring"),
    (lambda: compile_exprs({"a": None}), InputTypeError, "exprs['a'] must be a number or a SymPy expression"),
    (lambda: compile_exprs({"a": "b*l"}), InputTypeError, "read text with symbolic_cost.reader.read"),
    (lambda: compile_exprs({"a": b / 0}), InputError, "exprs['a'] must be a real number"),   # KeyError 'ComplexInfinity'
    (lambda: compile_exprs({"a": b * l}, rows=10**6)({"b": [1, 2, 3], "l": [1, 2, 3]}, at=[-1]), InputError,
     "at must be row numbers from 0 to 2"),                                # the last row, silently
    (lambda: compile_exprs({"a": b * l})([1, 2]), InputTypeError, "values must be a Mapping"),
    (lambda: _exact_function()({"a": l / b})({"b": 0, "l": 1}), InputError, "no exact value at b=0"),
    # a fifth probe: records, kernels' shapes, laws, and the page's requests
    (lambda: _collective(elements=-2**28), InputError, "collective elements must be at least 0"),   # -5 ms
    (lambda: _collective(group=0), InputError, "collective group must be a whole number at least 1"),   # zoo
    (lambda: _collective(element_bytes=0), InputError, "collective element_bytes must be positive"),
    (lambda: _wave(sms=0), InputError, "wave_slots' sms must be at least 1"),                            # NaN
    (lambda: _wave(m=-2048), InputError, "wave_slots' m must be positive"),                              # -1/15
    (lambda: _law()(1e-300), InputError, "under one token"),                                # 2e-136 parameters
    (lambda: _page().search_words({"preset": "gpt2", "devices": "8", "set": {"b": "4", "l": "512"}}, pathlib.Path(".")),
     InputError, "set.b: a search chooses the layout and takes only its l"),                             # dropped
    (lambda: _page().layers_words({"preset": "gpt2", "set": {"p": "4"}}, pathlib.Path(".")), InputError,
     "set.p: a layers request is one layer on one tensor-parallel device"),
    (lambda: _page().checked({"preset": "gpt2", "recompute": "full"}, "layers"), InputError,
     "recompute: a layers request has no recompute"),
    (lambda: _page().layout({"set": 0}), InputError, "set must be an object of layout values"),          # read as {}
    (lambda: _page().formula_words({"preset": "gpt2", "field": "memory_bytes", "keep": 0}, pathlib.Path(".")),
     InputError, "keep: unknown layout field(s) 0"),
]


def _collective(**changes):
    from symbolic_cost.cost import Collective
    return Collective(**{**dict(kind="allreduce", elements=2**28, element_bytes=1, group=8, pass_="fwd", volume=0),
                         **changes})


def _wave(**changes):
    from symbolic_cost.timing.efficiency import wave_efficiency
    return wave_efficiency(**{**dict(m=2048, n=4608, count=1, sms=108, tile_m=128, tile_n=128), **changes})


def _law():
    from symbolic_cost.analysis.scaling_laws import LAWS
    return LAWS["hoffmann-2022"].optimum().at


def _page():
    from symbolic_cost.app import commands
    return commands


def _heads(*args, **kwargs):
    from symbolic_cost.blocks.specs import Heads
    return Heads(*args, **kwargs)


def _exact_function():
    from symbolic_cost.numeric.exact import exact_function
    return exact_function


def _h100():
    from symbolic_cost.timing.systems import get_system
    return get_system("h100")


def _plan():
    from symbolic_cost.analysis.planning import plan
    return plan


def _between_steps():
    from symbolic_cost.analysis.scaling import between_steps
    return between_steps


def _plan_table():
    from symbolic_cost.analysis.planning import per_depth_table
    return per_depth_table


def _load():
    from symbolic_cost.inference import load
    return load


def _disaggregated(step, transfer=0):
    """``serve_disaggregated`` of ``step`` on one prefill and one decode instance, five requests."""
    from symbolic_cost.inference.disaggregated import Pools, serve_disaggregated
    return serve_disaggregated(step, 5, 1.0, requests=5, pools=Pools(1, 1), transfer=transfer)


class _TextStep:
    """A caller's step model whose price is text."""
    prompt = 100

    def __call__(self, prompts, decoding, context):
        return "x"


class _serving:                     # noqa: N801 - a namespace of the serving search's entrances
    @staticmethod
    def layouts(devices):
        from symbolic_cost.inference.serving_search import layouts
        return layouts(devices)

    @staticmethod
    def kv_transfer(step):
        from symbolic_cost.inference.disaggregated import kv_transfer_seconds
        return kv_transfer_seconds(step)


def _rank(**changes):
    from symbolic_cost.inference.serving import Serving
    from symbolic_cost.inference.serving_search import rank
    given = dict(arch=GPT2_ARCH, serving=Serving(l_in=512, l_out=64, flash=True), system="h100", devices=2,
                 slo=(1.0, 0.05), effort=_effort(10))
    return rank(**{**given, **changes})


def _effort(requests):
    from symbolic_cost.inference.serving_search import Effort
    return Effort(requests)


@pytest.mark.parametrize("call, kind, named", API, ids=[f"api-{i}-{named[:40]}" for i, (_, _, named) in enumerate(API)])
def test_api_refuses_with_the_library_error_naming_the_argument(call, kind, named):
    with pytest.raises(kind) as error:
        call()
    assert named in str(error.value)
    assert "\n" not in str(error.value)


def test_the_corpus_is_large():
    assert len(CLI) + len(API) >= 200


def test_an_error_keeps_its_argument_and_its_type():
    with pytest.raises(InputError) as error:
        mlp(1, 0, 8, 32)
    assert error.value.argument == "l" and isinstance(error.value, ValueError)
    with pytest.raises(TypeError):
        mlp(None, 8, 8, 32)


# ---------------------------------------------------------------------------------------------
# The reader: what it admits, exactly, and that only its walk over the syntax tree builds them.
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("0.5", Rational(1, 2)), ("80e9", 80_000_000_000), ("1_000", 1000), ("2**10", 1024),
    ("-(-3)", 3), ("+3", 3), ("4*e", 4 * e), ("l/2 + 1", l / 2 + 1), ("(b + l)*e", (b + l) * e),
    ("e**0.5", e ** Rational(1, 2)), ("Max(b, 2*l)", Max(b, 2 * l)), ("Min(3, 2)", 2),
])
def test_the_reader_reads_numbers_symbols_and_arithmetic_exactly(text, expected):
    assert read(text) == expected


def test_the_reader_reads_functions_and_conditions():
    from sympy import Eq, Lt, Mod, ceiling, floor, log
    assert read("ceiling(l/3) + floor(e/7) + log(b)") == ceiling(l / 3) + floor(e / 7) + log(b)
    work = Symbol("work")
    assert read("work <= 8 and not m1 > 2", names={"work": work}, condition=True) == ((work <= 8) & ~(m1 > 2))
    assert read("Eq(Mod(96, m1), 0) or b == 1", condition=True).has(Mod(96, m1))
    assert read("1 < b < 4", condition=True) == (Lt(1, b) & Lt(b, 4))
    assert read("b != 2", condition=True) == ~Eq(b, 2)


def test_new_symbols_are_readable_without_edits(monkeypatch):
    """The reader looks names up in ``symbols.BY_NAME`` at each call."""
    new = Symbol("zz", positive=True, integer=True)
    monkeypatch.setitem(S.BY_NAME, "zz", new)
    assert read("2*zz") == 2 * new


@pytest.mark.parametrize("text, position", [
    ("b + __import__('os')", 5), ("b*(l + x)", 8), ("e + l.real", 5), ("3 // b", 1), ("b + [1]", 5),
    ("b ** l", 6), ("b + 'x'", 5), ("(b", None),
])
def test_the_reader_points_at_the_first_offending_token(text, position):
    with pytest.raises(InputError) as error:
        read(text, argument="--set b")
    message = str(error.value)
    assert message.startswith("--set b: ")
    if position is not None:
        assert f"at position {position} of" in message


def test_only_the_readers_walk_builds_expressions(monkeypatch):
    """With ``eval``, ``exec``, SymPy's string parser and ``sympify`` of text all made to fail,
    the reader and the command line still read every formula."""
    import sys

    import sympy
    import sympy.parsing.sympy_parser as parser
    core = sys.modules["sympy.core.sympify"]

    def forbidden(*args, **kwargs):
        raise AssertionError("text was evaluated")

    real = core.sympify
    command = ["formula", "--block", "mlp", "--set", "f=4*e", "m1=1", "s1=1", "--at", "e=1024"]
    assert main(command) == 0          # first run: SymPy's lazy imports sympify names of their own

    def sympify_no_text(a, *args, **kwargs):
        if isinstance(a, str):
            forbidden()
        return real(a, *args, **kwargs)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(parser, "parse_expr", forbidden)
    monkeypatch.setattr(core, "sympify", sympify_no_text)
    monkeypatch.setattr(sympy, "sympify", sympify_no_text)
    for name, module in list(sys.modules.items()):
        if name.startswith("symbolic_cost") and getattr(module, "sympify", None) is real:
            monkeypatch.setattr(module, "sympify", sympify_no_text)
    assert read("Max(4*e, l/2) + ceiling(b/3)**2") == sympy.Max(4 * e, l / 2) + sympy.ceiling(b / 3) ** 2
    assert read("memory <= 80e9 or Eq(Mod(96, m1), 0)", names={"memory": Symbol("memory")}, condition=True)
    assert main(command) == 0
    assert main(["summary", "--preset", "gpt2", "--set", "b=2*2", "l=2**10", "--json"]) == 0


def test_no_eval_exec_or_parse_expr_in_the_package():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(?<![\w.])(?<!def )(eval|exec)\s*\(|parse_expr", line):   # def eval: a SymPy Function
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_every_refusal_in_the_package_is_the_librarys_own_error():
    """A refusal raises ``checks.InputError`` (a ``ValueError``) or ``InputTypeError``, so a
    caller can tell bad input from a bug by its type; a plain ``ValueError`` or ``TypeError``
    is not raised anywhere in the package (``KeyError`` stays for unknown row names)."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in PACKAGE.rglob("*.py")
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"raise (ValueError|TypeError)\(", line)]
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------------------------
# Hypothesis: random command lines and config files end in status 0 or 2, never a traceback,
# never a negative or non-finite number.
# ---------------------------------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.])[-+]?(\d+\.?\d*(e[-+]?\d+)?|nan|inf)(?![\w.])", re.IGNORECASE)
WORDS = ["0", "1", "2", "3", "4", "8", "12", "64", "1024", "-1", "-3", "0.5", "1.5", "1e3", "1e400", "nan", "inf",
         "2*b", "b", "l", "4*e", "l/2", "True", "None", "[1,2]", "(1,2)", "1/0", "2**70", "10**40", "Max(2, 4)",
         "x", "", "__import__('os')", "b.real", "'8'", "e", "-0", "m1", "1 < 2", "floor(7/2)", "ceiling(7/2)"]
NAMES = [*S.BY_NAME, "q", "B1", "", "b ", "es_mask"]
value = st.sampled_from(WORDS) | st.integers(-5, 5000).map(str) | st.text(max_size=8)
pair = st.tuples(st.sampled_from(NAMES), value).map(lambda p: f"{p[0]}={p[1]}")
sets = st.lists(pair, max_size=3).map(lambda pairs: ["--set", *pairs] if pairs else [])
integer = st.sampled_from(["0", "1", "2", "4", "8", "-1", "3", "1.5", "x", "1e3", "99999999999999999999"])


def _commands():
    preset = st.sampled_from(["gpt2", "bert-base-uncased", "llama-2-7b"])
    training = st.lists(st.sampled_from([["--zero", "1"], ["--zero", "3"], ["--flash"], ["--recompute", "full"],
                                         ["--recompute", "selective"], ["--precision", "fp32"],
                                         ["--distributed-optimizer"], ["--schedule", "gpipe"], ["--no-mtp"],
                                         ["--first-stage-layers", "3"], ["--recompute", "activation"]]),
                        max_size=2).map(lambda parts: [w for part in parts for w in part])
    summary = st.tuples(preset, sets, training, st.booleans()).map(
        lambda t: ["summary", "--preset", t[0], *t[1], *t[2], *(["--json"] if t[3] else [])])
    table = st.tuples(preset, st.sampled_from(["mlp", "attention", "layer"]), sets,
                      st.sampled_from(["text", "csv", "json"]), st.sampled_from([[], ["--layer-group", "1"],
                                                                                  ["--layer-group", "2"]])).map(
        lambda t: ["table", "--preset", t[0], "--block", t[1], *t[2], "--format", t[3], *t[4]])
    grid = st.tuples(st.sampled_from(["b", "l", "m1", "s1", "d", "p", "n_micro", "e", "q"]),
                     st.lists(st.sampled_from(WORDS[:12] + ["x", "nan"]), min_size=1, max_size=3)).map(
        lambda g: f"{g[0]}={','.join(g[1])}")
    sweep_ = st.tuples(preset, st.lists(grid, min_size=1, max_size=2), sets).map(
        lambda t: ["sweep", "--preset", t[0], "--grid", *t[1], *t[2], "--field", "memory_bytes,total"])
    profile = st.tuples(sets, integer, integer).map(lambda t: ["profile", "--preset", "gpt2", *t[0],
                                                               "--top", t[1], "--depth", t[2]])
    lstm = st.lists(st.sampled_from(["--batch", "--steps", "--hidden", "--vocab", "--layers", "--dp",
                                     "--element-bytes", "--gates"]), min_size=5, max_size=8, unique=True).flatmap(
        lambda flags: st.lists(integer, min_size=len(flags), max_size=len(flags)).map(
            lambda vals: ["lstm", *[w for pair in zip(flags, vals) for w in pair]]))
    return summary | table | sweep_ | profile | lstm


def _no_bad_numbers(text: str) -> None:
    for match in NUMBER.finditer(text):
        number = float(match.group(0))
        assert math.isfinite(number) and number >= 0, f"{match.group(0)!r} in {text[:400]}"


def _checked(argv, capsys):
    status, out, err = run_cli(argv, capsys)
    assert status in (0, 2), (argv, status, err)
    assert "Traceback" not in out + err
    if status == 2:
        assert err.count("\n") == 1 and not out, (argv, err)
    else:
        _no_bad_numbers(out)
    return status, out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_commands())
def test_random_command_lines_end_in_0_or_2(argv, capsys):
    _checked(argv, capsys)


def _formula_commands():
    """Commands that print formulas (a minus sign is legitimate there): status and traceback only."""
    optional = st.sampled_from([[], ["--preset", "gpt2"], ["--flash"], ["--no-bias"], ["--field", "time"],
                                ["--field", "act_buffer"], ["--conventions", "lbnl-2024"]])
    sets_and_points = st.tuples(sets, st.lists(pair, max_size=2))
    formula = st.tuples(st.sampled_from(["mlp", "attention", "layer"]), optional, sets_and_points,
                        st.sampled_from([[], ["--diff", "l"], ["--elasticity", "e"], ["--leading", "e,l"],
                                         ["--by", "b*l"], ["--by", "1/0"], ["--diff", "q"]])).map(
        lambda t: ["formula", "--block", t[0], *t[1], *t[2][0], *(["--at", *t[2][1]] if t[2][1] else []), *t[3]])
    crossover = st.tuples(optional, sets, st.sampled_from(["l", "e", "b", "q"])).map(
        lambda t: ["crossover", *t[0], *t[1], "--for", t[2]])
    scheme = st.tuples(st.sampled_from(["ulysses", "ring-attention", "megatron-sp"]), sets,
                       st.sampled_from([[], ["--flash"], ["--no-causal"], ["--contiguous"]])).map(
        lambda t: ["scheme", "--scheme", t[0], *t[1], *t[2]])
    inference = st.tuples(sets, st.booleans()).map(
        lambda t: ["inference", "--preset", "llama-2-7b", *t[0], *(["--json"] if t[1] else [])])
    return formula | crossover | scheme | inference


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_formula_commands())
def test_random_formula_command_lines_end_in_0_or_2(argv, capsys):
    status, out, err = run_cli(argv, capsys)
    assert status in (0, 2), (argv, status, err)
    assert "Traceback" not in out + err
    assert status == 0 or (err.count("\n") == 1 and not out), (argv, err)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(devices=st.sampled_from(["1", "2", "4", "8", "6", "0", "-2", "x"]),
       batch=st.sampled_from(["1", "8", "16", "0", "-4"]), seq=st.sampled_from(["64", "128", "0", "1", "-1"]),
       top=st.sampled_from(["1", "3", "0", "-1"]))
def test_random_searches_end_in_0_or_2(devices, batch, seq, top, capsys):
    _checked(["search", "--preset", "gpt2", "--devices", devices, "--global-batch", batch, "--seq", seq,
              "--top", top], capsys)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**6) | st.sampled_from([0, 1, 2, 4, 12, 64, 768, 2**60]) |
    st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


PUBLISHED = [json.loads(p.read_text()) for p in sorted((pathlib.Path(__file__).parent / "hf_configs").glob("*.json"))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from([GPT2, LLAMA, *PUBLISHED]), data=st.data())
def test_random_config_files_end_in_0_or_2(base, data, tmp_path, capsys):
    """A valid config (GPT-2's, Llama's or any published one here) with one to three keys (known
    or new) set to random JSON values."""
    config = dict(base)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(config) + ["new_key"]))
        config[key] = data.draw(JSON_VALUES)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    status, out = _checked(["summary", "--hf-config", str(path), "--json"], capsys)
    if status == 0:
        json.loads(out)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=JSON_VALUES)
def test_random_json_documents_end_in_0_or_2(document, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    _checked(["summary", "--hf-config", str(path)], capsys)


def test_profile_refuses_a_symbol_it_cannot_print(capsys):
    """Found by the random command lines above: ``--set b=b`` left the profiler's table a formula,
    which ended in an internal error converting it to a float."""
    status, _, err = run_cli(["profile", "--preset", "gpt2", "--set", "b=b", "--top", "1", "--depth", "0"], capsys)
    assert status == 2 and "b stayed symbols" in err


def test_a_crossover_negative_at_every_real_width_is_refused(capsys):
    """Issue 66: ``crossover --a layer --b mlp`` printed a root negative for every positive size (a
    layer holds an MLP: its FLOPs are always more).  Each real width's value, by hand from the
    printed root, is negative (gpt2: e = 768, h = 12, every degree 1: -8 e^2 - e - 10 e + 2 e + h < 0)."""
    status, _, err = run_cli(["crossover", "--a", "layer", "--b", "mlp"], capsys)
    assert status == 2 and "never have equal flops_fwd at a positive l" in err
    assert run_cli(["crossover", "--set", "f=4*e", "m1=1", "s1=1"], capsys)[0] == 0


def test_a_coefficient_past_the_digit_cap_is_refused(capsys):
    """Issue 66: the 30-digit cap looked at numbers only, so values that refer to each other built a
    formula with a coefficient of any size (10**29 f with f = 10**29 b: 10**58 b)."""
    status, _, err = run_cli(["formula", "--block", "mlp", "--field", "flops_fwd", "--set", "e=10**29*f",
                              "f=10**29*b"], capsys)
    assert status == 2 and "larger than 10**30" in err
    assert run_cli(["formula", "--block", "mlp", "--field", "flops_fwd", "--set", "e=10**29*b"], capsys)[0] == 0


HOSTILE_OPTION_TEXT = ["1/0", "0/0", "nan", "inf", "-inf", "1e400", "-1", "0", "", " ", "\x00", "２", "x**2",
                       "__import__('os')", "10**100", "1:0", "[1]", "{}", "None", "1,2", "=", "a=b"]
"""Text a user may type where an option takes a value: each either read or refused by the option's
type, never an exception argparse does not turn into a usage error."""


def _typed_options():
    """``(command, flag, type)`` of every option of every command whose value goes through a type."""
    import argparse
    from symbolic_cost.cli import NAMES, build_parser
    for name in NAMES:
        parser = build_parser(name)
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for action in commands.choices[name]._actions:
            if action.option_strings and callable(action.type):
                yield name, action.option_strings[-1], action.type


def test_every_option_type_reads_or_refuses_hostile_text_as_argparse_reports_it():
    """argparse turns an option type's ``ValueError``, ``TypeError`` or ``ArgumentTypeError`` into
    a usage error (exit 2, one line naming the option); anything else (``ZeroDivisionError`` from
    ``Fraction("1/0")``, found by a CLI fuzz) escapes it as an internal error (exit 3)."""
    import argparse
    typed = list(_typed_options())
    assert len(typed) > 40 and {"--capacity-factor", "--budget-flops", "--days"} <= {flag for _, flag, _ in typed}
    for command, flag, kind in typed:
        for text in HOSTILE_OPTION_TEXT:
            try:
                kind(text)
            except (ValueError, TypeError, argparse.ArgumentTypeError):
                pass
            except Exception as error:       # noqa: BLE001  the point of the test
                pytest.fail(f"{command} {flag} {text!r}: {type(error).__name__}: {error}")


def test_a_sympy_cache_size_sympy_would_choke_on_is_refused_by_name(monkeypatch, capsys):
    """The package sets SYMPY_CACHE_SIZE where none is set; one SymPy cannot read (it raises as it
    imports) ended in an internal error.  A whole number or 'none' is what SymPy's cache reads."""
    monkeypatch.setenv("SYMPY_CACHE_SIZE", "abc")
    status, out, err = run_cli(["sweep", "--preset", "gpt2", "--grid", "b=1"], capsys)
    assert status == 2 and not out and err.count("\n") == 1 and "SYMPY_CACHE_SIZE='abc'" in err
    monkeypatch.setenv("SYMPY_CACHE_SIZE", "none")
    assert run_cli(["summary", "--preset", "gpt2", "--json"], capsys)[0] == 0
