"""A step of the serving simulations priced by hand (``tests/test_serving_*.py``): a constant
number of seconds whatever it runs, recording what it was asked."""

from symbolic_cost.inference.load import Runtime


class Constant:
    """A step that takes ``seconds`` whatever it runs, and records what it was asked."""

    def __init__(self, seconds, prompt=100):
        self.seconds, self.prompt, self.calls = seconds, prompt, []

    def __call__(self, prompts, decoding, context):
        self.calls.append((prompts, decoding, context))
        return self.seconds


NO_OVERHEAD = Runtime(step_overhead=0, request_overhead=0)
"""An engine without the fitted overheads: its times are the steps' alone."""
