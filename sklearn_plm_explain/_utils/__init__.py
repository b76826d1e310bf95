"""Runtime helpers shared by the explainers: the black box, floats, validation,
progress and products."""

# SPDX-License-Identifier: BSD-3-Clause
