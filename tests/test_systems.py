"""The system presets against their datasheets (the numbers restated here from the sources named
in ``timing/systems.py``), and the calibrated model on each."""

import pytest
from sympy import Rational

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError
from symbolic_cost.ops.matmul import linear
from symbolic_cost.timing import efficiency as eff
from symbolic_cost.timing.hardware import SYSTEMS, calibrated, get_system

T, G = 10**12, 10**9
DATASHEETS = {   # dense bf16, FP8 FLOP/s; HBM bytes/s and bytes; devices per NVLink domain
    "h100": (Rational("989.4") * T, Rational("1978.9") * T, 3350 * G, 80 * G, 8),
    "h100-pcie": (756 * T, 1513 * T, 2000 * G, 80 * G, 2),
    "b200": (2250 * T, 4500 * T, 7700 * G, 180 * G, 8),
    "gb200": (2450 * T, 4900 * T, 8000 * G, 189471 * 2**20, 72),
    "mi300x": (Rational("1307.4") * T, Rational("2614.9") * T, 5300 * G, 192 * G, 8),
}


@pytest.mark.parametrize("name", list(DATASHEETS))
def test_a_preset_states_its_datasheet(name):
    s = get_system(name)
    assert (s.matrix_flops, s.fp8_flops, s.hbm_bandwidth, s.hbm_capacity, s.nvlink_size) == DATASHEETS[name]


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_every_preset_has_a_calibrated_model(name):
    system = calibrated(name)
    assert system.efficiency.matrix <= 1 and system.efficiency.memory <= 1
    assert system.efficiency.matrix == Rational(eff.CALIBRATION["fitted"][eff.FAMILY[name]]["matrix"])


def test_a_full_wave_product_on_b200_runs_at_its_peak_times_the_factor():
    s = calibrated("b200")
    m, k, n = 128 * 37, 4096, 256 * 8          # 37 x 8 = 296 = 2 x 148 tiles of 128 x 256
    assert eff.wave_efficiency(m, n, 1, 148, 128, 256) == 1
    # the product's m n (2k - 1) FLOPs and the bias's m n adds: 2 m k n at the sustained rate
    seconds = 2 * m * k * n / (2250 * T * s.efficiency.matrix)
    compute, _ = eff.pass_times(linear(1, m, k, n), "fwd", s, conv.DEFAULT)
    assert compute == seconds


def test_an_unknown_system_lists_the_new_ones():
    with pytest.raises(InputError, match="b200.*gb200.*mi300x"):
        get_system("b100")
