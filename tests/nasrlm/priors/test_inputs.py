import numpy as np

from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.priors.feature_prior import FeaturePrior
from nasrlm.priors.inputs import InputRoles
from nasrlm.priors.transfer import TRANSFER_LABEL


def test_roles_follow_the_names():
    roles = InputRoles.of(["params_m", "conv3_all", "conv3", "evidence:fpga", TRANSFER_LABEL])
    np.testing.assert_array_equal(roles.line, [True, True, True, True, False])  # no line through a guess
    np.testing.assert_array_equal(roles.free, [True, False, False, False, False])
    np.testing.assert_array_equal(roles.summed, [False, True, False, False, False])  # counts over all edges


def test_every_label_has_a_role_a_feature_prior_reads():
    names = [o.name for o in ALL_FREE_OBJECTIVES]
    roles = InputRoles.of(names)
    assert roles.line.all() and 0 < roles.free.sum() < roles.summed.size and roles.summed.any()
    assert not (roles.free & roles.summed).any()


def test_a_cost_s_sum_reads_the_summed_counts_it_is_given():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=(40, 2)).astype(float)
    latency = 1.0 + 2.0 * counts[:, 0] + 0.5 * counts[:, 1]
    x = np.column_stack([rng.normal(size=40), counts])  # a label, then two counts a device adds up
    roles = InputRoles.of(["params_m", "conv3_all", "pool_all"])
    prior, _ = FeaturePrior.fit(x, latency[:, None], kind="trend-forest", costs=[True], **roles.keywords())
    assert prior.kinds == ["sum-forest"]
    np.testing.assert_array_equal(prior.summed, roles.summed)
