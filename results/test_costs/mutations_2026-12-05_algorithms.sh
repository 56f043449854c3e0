#!/usr/bin/env bash
# Issue 66: one defect per new algorithm piece (a sign or a coefficient of its update), each
# with the tests that must catch it (results/test_costs/mutation_lib.sh).
source "$(dirname "$0")/mutation_lib.sh"
apply fednova_ignores_momentum tff_fedwin/algorithms/fednova.py $'  if not momentum:\n    return tau' $'  if True:\n    return tau' tests/algorithms/fednova_test.py
apply fednova_without_tau_eff tff_fedwin/algorithms/fednova.py "lambda d: tf.cast(mean['steps'], d.dtype) * d" "lambda d: d" tests/algorithms/fednova_test.py
apply sam_step_down_the_gradient tff_fedwin/algorithms/sharpness.py "  coefficient = sharpness.rho / (norm + NORM_EPSILON)" "  coefficient = -sharpness.rho / (norm + NORM_EPSILON)" tests/algorithms/sharpness_test.py
apply asam_scales_biases tff_fedwin/algorithms/sharpness.py "  return base not in _BIAS_NAMES" "  return True" tests/experiments/wiring_test.py -k asam
apply asam_scales_once tff_fedwin/algorithms/sharpness.py "      coefficient * (g if t is None else g * t)" "      coefficient * g" tests/algorithms/sharpness_test.py
apply sam_metrics_counted_twice tff_fedwin/algorithms/reference_gradient.py $'  for variable, value in restored:\n    variable.assign(value)' $'  for variable, value in list(restored)[: len(variables)]:\n    variable.assign(value)' tests/algorithms/sharpness_test.py
apply partial_window_parts_swapped tff_fedwin/algorithms/partial_window_runner.py $'  if part == \'classifier\':\n    head, body = window, global_\n  else:\n    head, body = global_, window' $'  if part != \'classifier\':\n    head, body = window, global_\n  else:\n    head, body = global_, window' tests/algorithms/partial_window_runner_test.py
apply swa_running_mean_off_by_one tff_fedwin/algorithms/swa_runner.py "    return (swa * n + w) / (n + 1.0)" "    return (swa * n + w) / (n + 2.0)" tests/algorithms/swa_runner_test.py
apply swa_updates_from_the_start_round tff_fedwin/algorithms/swa_runner.py "    return since > 0 and since % self._cycle == 0" "    return since >= 0 and since % self._cycle == 0" tests/algorithms/swa_runner_test.py
apply feddyn_h_sign tff_fedwin/algorithms/feddyn.py "        lambda h, d: h + d / tf.cast(r.total_clients, h.dtype)," "        lambda h, d: h - d / tf.cast(r.total_clients, h.dtype)," tests/algorithms/feddyn_test.py
apply feddyn_client_vector_sign tff_fedwin/algorithms/feddyn.py "        lambda s, d: s + tf.cast(self._alpha, s.dtype) * d," "        lambda s, d: s - tf.cast(self._alpha, s.dtype) * d," tests/algorithms/feddyn_test.py
apply feddyn_without_regularizer tff_fedwin/algorithms/feddyn.py "        lambda g, w, b: g + tf.cast(alpha, w.dtype) * w - b," "        lambda g, w, b: g - b," tests/experiments/wiring_test.py -k feddyn
apply feddyn_server_step_without_lr tff_fedwin/algorithms/feddyn.py "        + tf.cast(r.server_learning_rate, x.dtype)" "        + 1.0" tests/experiments/wiring_test.py -k feddyn
apply client_state_moves_x_without_data tff_fedwin/algorithms/client_state/server.py "  keep_without_data = lambda new, old: tf.where(has_data, new, old)" "  keep_without_data = lambda new, old: new" tests/algorithms/client_state/server_test.py
apply fedcm_mix_swapped tff_fedwin/algorithms/fedcm.py "        lambda g, d: tf.cast(alpha, g.dtype) * g" "        lambda g, d: tf.cast(1.0 - alpha, g.dtype) * g" tests/algorithms/fedcm_test.py
apply fedcm_delta_unnormalized tff_fedwin/algorithms/fedcm.py "        lambda d: d / tf.cast(scale, d.dtype), r.model_delta" "        lambda d: d, r.model_delta" tests/experiments/wiring_test.py -k fedcm
apply fedacg_no_lookahead tff_fedwin/algorithms/fedacg.py "        lambda x, m: x + tf.cast(self._lookahead, x.dtype) * m," "        lambda x, m: x + 0.0 * m," tests/algorithms/fedacg_test.py
apply fedacg_momentum_not_decayed tff_fedwin/algorithms/fedacg.py "            lambda m, d: tf.cast(self._lookahead, m.dtype) * m + d," "            lambda m, d: m + d," tests/experiments/wiring_test.py -k fedacg
apply adabest_no_staleness_decay tff_fedwin/algorithms/adabest.py "          h / tf.cast(r.rounds_since_last, h.dtype)" "          h" tests/algorithms/adabest_test.py
apply adabest_server_correction_sign tff_fedwin/algorithms/adabest.py "        * (new - tf.cast(self._beta, x.dtype) * (old - new) - x)," "        * (new + tf.cast(self._beta, x.dtype) * (old - new) - x)," tests/algorithms/adabest_test.py
apply client_state_last_round_not_kept tff_fedwin/algorithms/client_state/client.py "      last_round = tf.where(output.num_steps > 0, t, client_state.last_round)" "      last_round = client_state.last_round" tests/algorithms/adabest_test.py
apply mime_momentum_undamped tff_fedwin/algorithms/mime.py "        lambda m, c: tf.cast(1.0 - self._beta, c.dtype) * c" "        lambda m, c: c" tests/algorithms/mime_test.py
apply mime_step_undamped tff_fedwin/algorithms/mime.py "        lambda g, m: tf.cast(1.0 - beta, g.dtype) * g + m, gradients, momentum" "        lambda g, m: g + m, gradients, momentum" tests/experiments/wiring_test.py -k mime
apply mime_no_start_gradient tff_fedwin/algorithms/client_training.py "      gradients = tf.nest.map_structure(tf.subtract, gradients, at_start)" "      gradients = gradients" tests/algorithms/mime_test.py
apply full_gradient_per_batch tff_fedwin/algorithms/reference_gradient.py "    count += size" "    count += 1.0" tests/algorithms/mime_test.py
apply fedgma_hard_mask tff_fedwin/algorithms/fedgma.py $'      tf.ones_like(agreement),\n      agreement,\n  )' $'      tf.ones_like(agreement),\n      tf.zeros_like(agreement),\n  )' tests/algorithms/fedgma_test.py
apply fedgma_threshold_flipped tff_fedwin/algorithms/fedgma.py "      agreement > tf.cast(threshold, agreement.dtype)," "      agreement < tf.cast(threshold, agreement.dtype)," tests/experiments/wiring_test.py -k fedgma
apply fedgma_unmasked tff_fedwin/algorithms/fedgma.py "    masked = tf.nest.map_structure(tf.multiply, mask, r.mean_model_delta)" "    masked = r.mean_model_delta" tests/experiments/wiring_test.py -k fedgma
apply family_schedule_not_passed tff_fedwin/experiments/registry.py $'      client_state_transfer=transfer,\n      client_learning_rate_fn=algorithm_parts.client_learning_rate_fn(config),' $'      client_state_transfer=transfer,' tests/experiments/wiring_test.py -k "feddyn_wsm_ima or fedgma_wsm_ima or fedcm_wsm_window"
apply family_schedule_vector_constant_rate tff_fedwin/algorithms/client_state/client.py "              learning_rate=learning_rate," "              learning_rate=client_learning_rate," tests/algorithms/client_state/schedule_test.py
apply family_schedule_steps_constant_rate tff_fedwin/algorithms/client_state/client.py "        optimizer_hparams=hparams," "        optimizer_hparams=None," tests/algorithms/client_state/schedule_test.py
apply epoch_decay_one_round_early tff_fedwin/training/sampling.py "  return lambda t: max(1, epochs - max(0, t - start_round) // every)" "  return lambda t: max(1, epochs - max(0, t - start_round + 1) // every)" tests/experiments/wiring_test.py -k epoch_decay
apply epoch_decay_key_ignored tff_fedwin/training/sampling.py "      epochs['epochs'] = tf.strings.to_number(fields[1], tf.int64)" "      epochs['epochs'] = tf.constant(3, tf.int64)" tests/experiments/wiring_test.py -k epoch_decay
apply family_rate_metric_one_round_late tff_fedwin/algorithms/client_state/server.py "            client_learning_rate_fn, state.round_num" "            client_learning_rate_fn, state.round_num + 1" tests/experiments/wiring_test.py -k "feddyn_wsm_ima or fedgma_wsm_ima or fedcm_wsm_window"
apply fedfa_anchor_loss_without_1_over_c tff_fedwin/algorithms/fedfa.py "      / tf.cast(num_classes, tf.float32)" "      / 1.0" tests/algorithms/fedfa_test.py
apply fedfa_calibration_ascends tff_fedwin/algorithms/fedfa.py "    v.assign_sub(state.calibrate * step)" "    v.assign_add(state.calibrate * step)" tests/algorithms/fedfa_test.py
apply fedfa_anchors_not_example_weighted tff_fedwin/algorithms/fedfa.py "    return (examples * client_anchors, examples)" "    return (client_anchors, examples)" tests/experiments/wiring_test.py -k fedfa
apply fedfa_anchor_loss_in_round_1 tff_fedwin/algorithms/fedfa.py "        anchor_loss_on=tf.cast(done > 0, tf.float32)," "        anchor_loss_on=tf.cast(done >= 0, tf.float32)," tests/algorithms/fedfa_test.py
apply fedfa_calibration_one_round_late tff_fedwin/algorithms/fedfa.py "        calibrate=tf.cast(done + 1.0 >= self._calibration_start, tf.float32)," "        calibrate=tf.cast(done >= self._calibration_start, tf.float32)," tests/experiments/wiring_test.py -k fedfa
apply fedfa_one_pass_skips_metrics tff_fedwin/tasks/feature_model.py "      metric.update_state(y_true=y, y_pred=predictions)" "      pass" tests/tasks/feature_model_test.py
apply fedfa_one_pass_features_after_classifier tff_fedwin/tasks/feature_model.py "    return output, features" "    return output, predictions" tests/algorithms/fedfa_test.py
