"""The trainer of :func:`~.distill.distill`: TRL's ``SFTTrainer`` with our loss, each row's mean completion-token loss
averaged over a step's rows (imported when a student is trained: TRL takes seconds to import)."""

from __future__ import annotations

import torch
from trl import SFTTrainer


class StudentTrainer(SFTTrainer):
    """TRL's ``SFTTrainer`` whose loss is the mean over a step's rows of each row's mean completion-token loss (TRL's
    own is the mean over the step's completion tokens, so a long completion outweighs a short one in a multi-task
    step), with the LM head run on the positions that predict a completion token only (``logits_to_keep``: on a CPU,
    TRL's fused head scores every position)."""

    loss_is_scaled_for_ga = False  # a mean per micro-batch: the Trainer divides by the accumulation steps

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")[:, 1:]  # the token each position predicts
        keep = (labels != -100).any(0).nonzero().flatten()  # positions that predict a completion token in some row
        outputs = model(**inputs, use_cache=False, logits_to_keep=keep)
        targets = labels[:, keep]
        losses = torch.nn.functional.cross_entropy(outputs.logits.float().transpose(1, 2), targets, reduction="none")
        if "seq_idx" in inputs:  # padding-free: the step's rows concatenated, each token's row numbered
            rows = inputs["seq_idx"][:, 1:][:, keep].to(targets.device)
        else:
            rows = torch.arange(targets.size(0), device=targets.device)[:, None].expand_as(targets)
        count = int(rows.max()) + 1
        sums = losses.new_zeros(count).index_add(0, rows.flatten(), losses.flatten())  # 0 where ignored (-100)
        tokens = losses.new_zeros(count).index_add(0, rows.flatten(), (targets != -100).flatten().to(losses.dtype))
        loss = (sums / tokens.clamp(min=1)).mean()
        return (loss, outputs) if return_outputs else loss
