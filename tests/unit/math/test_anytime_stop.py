"""The anytime-valid answer stop and the quality-weighted vote against hand-computed numbers
(martingale.lead_evalue / anytime_lead, answers.quality_weights / first_seen_counts,
and the settings that switch them on)."""

import math

import numpy as np
import pytest

from mfs_core import martingale
from mfs_core.answers import first_seen_counts, quality_weights
from mfs_core.settings import MFSSettings


@pytest.mark.parametrize(("leader", "rival", "expected"), [
    (0, 0, 1.0),  # no draw: the e-process starts at 1
    (1, 0, 3 / 2),  # 4 · B(2, 1) · P(Bin(2, 1/2) <= 1) = 4 · 1/2 · 3/4
    (7, 0, 255 / 8),  # (2^(x+1) - 1) / (x + 1)
    (8, 0, 511 / 9),
    (2, 1, 11 / 12),  # 16 · B(3, 2) · P(Bin(4, 1/2) <= 2) = 16 · 1/12 · 11/16
    (5, 1, 20 / 7),  # 128 · B(6, 2) · P(Bin(7, 1/2) <= 5) = 128 · 1/42 · 120/128
    (1, 2, 5 / 12),  # 16 · B(2, 3) · P(Bin(4, 1/2) <= 1) = 16 · 1/12 · 5/16
])
def test_lead_evalue_is_the_mixture_likelihood_ratio(leader, rival, expected):
    assert martingale.lead_evalue(leader, rival) == pytest.approx(expected, rel=1e-12)


def test_lead_evalue_equals_its_integral_for_counts_that_are_not_integers():
    # 2 ∫_{1/2}^1 (2q)^2.5 (2(1-q))^0.5 dq, by the midpoint rule
    q = (np.arange(200_000) + 0.5) / 200_000 * 0.5 + 0.5
    integral = 2 * float(np.mean((2 * q) ** 2.5 * (2 * (1 - q)) ** 0.5)) * 0.5
    assert martingale.lead_evalue(2.5, 0.5) == pytest.approx(integral, rel=1e-6)


def test_lead_evalue_grows_with_the_leader_and_falls_with_the_rival():
    assert martingale.lead_evalue(4, 1) > martingale.lead_evalue(3, 1) > martingale.lead_evalue(3, 2)
    with pytest.raises(ValueError, match="draw counts must be >= 0, got leader=-1, rival=0"):
        martingale.lead_evalue(-1, 0)


def test_anytime_lead_certifies_nine_unanimous_draws_at_five_percent():
    nine = martingale.anytime_lead([9], 0.05)  # E(8, 0) = 511/9 = 56.8 >= 2 / 0.05 = 40
    assert (nine.index, nine.certified, nine.threshold) == (0, True, pytest.approx(40.0))
    assert nine.e_value == pytest.approx(511 / 9)
    eight = martingale.anytime_lead([8], 0.05)  # E(7, 0) = 255/8 = 31.9 < 40
    assert (eight.certified, eight.e_value) == (False, pytest.approx(255 / 8))


def test_anytime_lead_charges_a_later_answer_its_place_in_the_order():
    # answer 2 (6 draws) against answer 1 (1 draw): E(5, 1) = 20/7 against 2·3/0.5 = 12; answer 1: E(0, 6) < 1
    lead = martingale.anytime_lead([1, 6], 0.5)
    assert (lead.index, lead.certified) == (1, False)
    assert (lead.e_value, lead.threshold) == (pytest.approx(20 / 7), pytest.approx(12.0))
    # the same draws with answer 2 first: threshold 2/0.5 = 4, still 20/7 < 4
    assert not martingale.anytime_lead([6, 1], 0.5).certified
    # 7 against 1, first: E(6, 1) = 256 · B(7, 2) · P(Bin(8, 1/2) <= 6) = 256 · 1/56 · 247/256 = 247/56 >= 4
    first = martingale.anytime_lead([7, 1], 0.5)
    assert first.certified and first.e_value == pytest.approx(247 / 56)


def test_anytime_lead_of_nothing_drawn_and_bad_input():
    assert martingale.anytime_lead([], 0.1) == martingale.AnytimeLead(-1, 1.0, math.inf, False)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\), got 1.0"):
        martingale.anytime_lead([3], 1.0)
    with pytest.raises(ValueError, match="at least 1 draw"):
        martingale.anytime_lead([3, 0], 0.1)


def test_anytime_lead_rarely_certifies_a_non_mode_under_optional_stopping():
    """Ville's bound, by simulation: i.i.d. answers with mode 0 (p = 0.4, 0.35, 0.25), the test looked at
    after every draw, up to 120 draws: a non-mode is certified in at most α of the runs."""
    rng = np.random.default_rng(0)
    alpha, wrong = 0.2, 0
    for _ in range(400):
        counts: dict[int, int] = {}
        for x in rng.choice(3, size=120, p=[0.4, 0.35, 0.25]):
            counts[int(x)] = counts.get(int(x), 0) + 1
            lead = martingale.anytime_lead(list(counts.values()), alpha)
            if lead.certified:
                wrong += list(counts)[lead.index] != 0
                break
    assert wrong / 400 <= alpha


def test_quality_weights_are_exp_beta_f_relative_to_the_best():
    assert quality_weights([-0.2, -0.4], 5.0) == pytest.approx([1.0, math.exp(-1.0)])
    assert quality_weights([-0.2, -0.4], 0.0) == [1.0, 1.0]
    assert quality_weights([], 5.0) == []
    with pytest.raises(ValueError, match="vote_quality_beta must be a finite number >= 0, got -1.0"):
        quality_weights([-0.2], -1.0)


def test_first_seen_counts_keep_the_order_of_first_appearance():
    assert first_seen_counts(["7", None, "8", "7"]) == {"7": 2, "8": 1}
    assert list(first_seen_counts(["8", "7", "7"])) == ["8", "7"]


def test_the_rule_settings_default_to_todays_search_and_name_bad_values():
    s = MFSSettings()
    assert (s.foresight_window, s.answer_stop_alpha, s.convergence_stop, s.vote_quality_beta, s.sc_round_size) == (
        None, None, True, None, None)
    with pytest.raises(ValueError, match=r"answer_stop_alpha=1.5: .*0.0 < answer_stop_alpha < 1.0"):
        MFSSettings(answer_stop_alpha=1.5)
    with pytest.raises(ValueError, match=r"foresight_window=0: .*1 <= foresight_window <= 65536"):
        MFSSettings(foresight_window=0)
    with pytest.raises(ValueError, match=r"foresight_window \(32\) needs reuse_rollouts=False"):
        MFSSettings(foresight_window=32, reuse_rollouts=True)
    for name in ("foresight_window", "answer_stop_alpha", "convergence_stop", "vote_quality_beta", "sc_round_size"):
        assert "default" in MFSSettings.model_fields[name].description, name
