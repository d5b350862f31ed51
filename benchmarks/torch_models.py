"""PyTorch models for the real-model corpus (`benchmarks/models.py`), exported as their users export
them: `torch.onnx.export` (PyTorch's default exporter; the TorchScript one where it fails) on
torchvision, Hugging Face transformers and segmentation-models-pytorch architectures with random
weights (nothing is downloaded: each model is built from its default configuration). The text
encoders are exported from `inputs_embeds` (float32 [1, 128, hidden]), as when the corpus was first
measured (eqdsl then refused int64 inputs; token ids now import as `typed_input`).

Runs in an environment that has torch (benchmark only, never eqdsl's dependency):
  python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch torchvision onnx onnxscript \\
      transformers segmentation-models-pytorch
  /tmp/torchenv/bin/python benchmarks/torch_models.py OUT_DIR [--models a,b]
Writes OUT_DIR/<name>.onnx and OUT_DIR/exports.json (per model: input shapes, exporter, seconds or error).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

IMAGE = {"x": [1, 3, 224, 224]}


def _tokens(hidden: int) -> dict[str, list[int]]:
    return {"inputs_embeds": [1, 128, hidden]}


def _vision(name: str) -> Callable[[], Any]:
    def make():
        import torchvision

        backbone = {"weights_backbone": None} if "deeplab" in name else {}  # no download of any weights
        return torchvision.models.get_model(name, weights=None, **backbone)
    return make


def _hf(config: str, model: str, **kwargs: Any) -> Callable[[], Any]:
    def make():
        import transformers

        return getattr(transformers, model)(getattr(transformers, config)(**kwargs))
    return make


class _Encoder(torch.nn.Module):
    """A model's encoder alone, returning its last hidden state (one tensor)."""

    def __init__(self, model: Any, whisper: bool = False) -> None:
        super().__init__()
        self.model, self.whisper = model, whisper

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(input_features=x) if self.whisper else self.model(inputs_embeds=x)
        return out.last_hidden_state


def _hidden(make: Callable[[], Any], whisper: bool = False) -> Callable[[], Any]:
    return lambda: _Encoder(make(), whisper)


class _Detr(torch.nn.Module):
    """DETR (ResNet-50 backbone built from its config, no weights downloaded): class logits and boxes."""

    def __init__(self) -> None:
        super().__init__()
        import transformers

        config = transformers.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False,
                                         backbone_config=transformers.ResNetConfig(out_features=["stage4"]))
        self.model = transformers.DetrForObjectDetection(config)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(pixel_values=x, pixel_mask=torch.ones_like(x[:, 0], dtype=torch.long))
        return out.logits, out.pred_boxes


def _unet():
    import segmentation_models_pytorch as smp

    return smp.Unet("resnet34", encoder_weights=None, classes=2)


MODELS: dict[str, tuple[Callable[[], Any], dict[str, list[int]]]] = {
    "resnet50": (_vision("resnet50"), IMAGE),
    "mobilenet_v3_large": (_vision("mobilenet_v3_large"), IMAGE),
    "efficientnet_b0": (_vision("efficientnet_b0"), IMAGE),
    "convnext_tiny": (_vision("convnext_tiny"), IMAGE),
    "regnet_y_400mf": (_vision("regnet_y_400mf"), IMAGE),
    "vit_b_16": (_vision("vit_b_16"), IMAGE),
    "swin_t": (_vision("swin_t"), IMAGE),
    "deeplabv3_mobilenet": (_vision("deeplabv3_mobilenet_v3_large"), IMAGE),
    "bert_base": (_hidden(_hf("BertConfig", "BertModel")), _tokens(768)),
    "distilbert": (_hidden(_hf("DistilBertConfig", "DistilBertModel")), _tokens(768)),
    "gpt2_small": (_hidden(_hf("GPT2Config", "GPT2Model")), _tokens(768)),
    "t5_small_encoder": (_hidden(_hf("T5Config", "T5EncoderModel", d_model=512, d_ff=2048, num_layers=6,
                                     num_heads=8)), _tokens(512)),
    "whisper_tiny_encoder": (_hidden(lambda: __import__("transformers").WhisperModel(
        __import__("transformers").WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4,
                                                 encoder_attention_heads=6, decoder_attention_heads=6)).encoder,
        whisper=True), {"x": [1, 80, 3000]}),
    "unet_resnet34": (_unet, {"x": [1, 3, 256, 256]}),
    "detr_resnet50": (_Detr, {"x": [1, 3, 320, 320]}),
}


def export(name: str, out: Path) -> dict[str, Any]:
    make, shapes = MODELS[name]
    try:
        model = make().eval()
    except Exception as err:  # noqa: BLE001  a package missing, a configuration it refuses
        return {"shapes": shapes, "exporter": None, "errors": [f"building: {type(err).__name__}: {str(err)[:200]}"]}
    args = tuple(torch.randn(s) for s in shapes.values())
    path = out / f"{name}.onnx"
    errors = []
    for dynamo in (True, False):
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                torch.onnx.export(model, args, str(path), input_names=list(shapes), dynamo=dynamo,
                                  opset_version=18 if dynamo else 17, external_data=False)
            return {"shapes": shapes, "exporter": "dynamo" if dynamo else "torchscript",
                    "seconds": round(time.perf_counter() - t0, 1), "errors": errors}
        except Exception as err:  # noqa: BLE001  each exporter's own failure, kept for the table
            errors.append(f"{'dynamo' if dynamo else 'torchscript'}: {type(err).__name__}: {str(err)[:200]}")
    return {"shapes": shapes, "exporter": None, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = out / "exports.json"
    done = json.loads(record.read_text()) if record.exists() else {}
    for name in args.models.split(","):
        if name in done and done[name].get("exporter") and (out / f"{name}.onnx").exists():
            continue
        done[name] = export(name, out)
        record.write_text(json.dumps(done, indent=2))
        print(name, done[name].get("exporter"), done[name].get("seconds"), done[name]["errors"][:1], flush=True,
              file=sys.stderr)


if __name__ == "__main__":
    main()
