"""Time: systems and the roofline per operation, the tiled-kernel model (DeepFlow),
systems derived from a power budget, and the step time of a whole model."""
