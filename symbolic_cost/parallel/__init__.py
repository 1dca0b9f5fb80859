"""Parallelism: the collectives (traffic and time of each kind), sequence and context
layouts (Megatron SP, Ulysses, ring attention), pipeline stages and ZeRO sharding."""
