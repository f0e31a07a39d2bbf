"""TensorFlow APIs fwport does not translate, with what to write in PyTorch instead (Direction.guidance).

A call or reference of one of these names is an error (no-rule, or residue for a name used as a value)
whose message is the guidance here: what a PyTorch program uses for the same job. They have no rule
because there is no faithful one-to-one translation: the TFRecord specs that recordhelpers.py does not
cover, and tf.data's file readers that yield string tensors
that the rest of a pipeline parses with tf.strings / tf.io ops. None of them counts as covered in
bench/coverage.py (only rules and structural passes do).
"""
from __future__ import annotations

_TFRECORD = ("TFRecordDataset, parse_single_example / parse_example, FixedLenFeature / VarLenFeature and the tf.train.Example "
             "messages are translated (plain-Python helpers written into the file, recordhelpers.py); ")

GUIDANCE: dict[str, str] = {
    # TFRecord: files, parsing, writing, the Example protocol buffers
    "tensorflow.io.FixedLenSequenceFeature": "a feature spec of tf.train.SequenceExample records or of padded "
        "lists: " + _TFRECORD + "this spec is not: use a VarLenFeature and pad its values by hand",
    # text and CSV readers: string tensors parsed by tf.strings / tf.io ops downstream
    "tensorflow.data.experimental.make_csv_dataset":
        "batches of CSV columns as a dict of tensors: in PyTorch read the file with pandas.read_csv(path) "
        "(column_defaults → dtype=, na_value → na_values=, select_columns → usecols=), pop the label column, "
        "and wrap the columns' numpy arrays in torch.utils.data.TensorDataset with a "
        "DataLoader(batch_size=..., shuffle=True) (make_csv_dataset repeats forever unless num_epochs is given)",
    "tensorflow.data.experimental.CsvDataset":
        "the rows of CSV files as tuples of tensors: in PyTorch read them with pandas.read_csv(path, "
        "header=0 if header else None, usecols=select_cols) or numpy.loadtxt, and wrap the columns in "
        "torch.utils.data.TensorDataset",
    # used otherwise than the runtime pass follows (passes/runtime.py)
    "keras.utils.plot_model":
        "an image of the model's graph, used here as a value: torch draws no graphs itself; print(model) shows the "
        "module's structure, torchview.draw_graph(model, input_size=...) or torchviz.make_dot(model(x)) "
        "(third-party, need graphviz) draw it",
    "tensorflow.distribute.MirroredStrategy":
        "the strategy is used beyond `with strategy.scope():`, num_replicas_in_sync, run(fn, args=...), "
        "reduce(op, value, axis=None) and experimental_distribute_dataset(ds) (which fwport translates for "
        "torchrun's processes or one process), or its name is bound to another strategy in the same scope: "
        "distribute with torch's DistributedDataParallel under torchrun "
        "(init_process_group, DistributedDataParallel(model), a DistributedSampler per DataLoader, see "
        "docs/usage.md), or keep one process",
    "tensorflow.distribute.MultiWorkerMirroredStrategy":
        "synchronous training over several machines: torch's DistributedDataParallel under "
        "`torchrun --nnodes=N --nproc_per_node=GPUS --rdzv_endpoint=HOST:PORT file.py` "
        "(init_process_group('nccl'), DistributedDataParallel(model), a DistributedSampler per DataLoader)",
    "tensorflow.distribute.TPUStrategy":
        "TPUs: PyTorch runs on them through torch_xla (torch_xla.runtime, xla device tensors, "
        "torch_xla.distributed.xla_multiprocessing); translate for GPUs/CPUs first, then port to torch_xla",
    "tensorflow.distribute.cluster_resolver.TPUClusterResolver":
        "TPUs: PyTorch runs on them through torch_xla; translate for GPUs/CPUs first, then port to torch_xla",
    "tensorflow.errors.InvalidArgumentError":
        "TensorFlow's error for invalid arguments and shapes: torch raises RuntimeError (shape mismatches), "
        "ValueError or IndexError instead; catch those where this except clause catches InvalidArgumentError",
    # Keras objects left where fwport does not translate what uses them
    "keras.Input":
        "a symbolic input of Keras's functional API, here where fwport does not translate the model it starts "
        "(a functional model left as written, whose other errors say why; an Input stored on an object or in a "
        "list; one given to keras.applications): torch has no symbolic tensors, a module takes real tensors "
        "when called: write the model as an nn.Module whose forward takes this input (a (batch, *shape) "
        "tensor), and where a value of that shape is needed (a first call that builds lazy modules) give "
        "torch.zeros(batch, *shape)",
    "keras.constraints":
        "a weight constraint (max_norm, non_neg, unit_norm, ...) resolved or serialized for a layer: torch "
        "parameters carry no constraints: apply it to the parameter after each optimizer step, under "
        "torch.no_grad() (max_norm: p.copy_(torch.renorm(p, 2, dim, maxnorm)) over the output dim, non_neg: "
        "p.clamp_(min=0)), or with torch.nn.utils.parametrize.register_parametrization",
    # TensorFlow runtime objects with no torch counterpart
    "tensorflow.TensorSpec":
        "a tensor's shape and dtype as a signature (tf.function's input_signature, get_concrete_function, a "
        "SavedModel's signatures, Dataset.from_generator's output_signature): torch functions take tensors of any "
        "shape, so where the spec only constrains a traced function leave it out (check shapes with an assert "
        "where it guarded them); to export, give torch.export.export(model, (torch.zeros(shape, dtype=...),), "
        "dynamic_shapes=...) an example input, a None dimension being a torch.export.Dim",
    "tensorflow.TensorShape":
        "a static shape that may hold unknown (None) dimensions: torch.Size holds only ints (a tensor's .shape); "
        "where every dimension is known write a tuple of ints (or torch.Size(dims)); as_list() is list(shape)",
    "tensorflow.ragged":
        "ragged tensors (rows of different lengths) have no exact torch counterpart: keep the rows as a Python list "
        "of tensors and pad them into one tensor with torch.nn.utils.rnn.pad_sequence(rows, batch_first=True) (with "
        "a mask or the lengths where the padding must not count), or torch.nested.nested_tensor(rows) for the ops "
        "nested tensors support",
    "tensorflow.experimental.dtensor":
        "DTensor's meshes and layouts (a tensor sharded over devices): torch's counterpart is "
        "torch.distributed.tensor (DeviceMesh via torch.distributed.device_mesh.init_device_mesh, "
        "distribute_tensor with Shard(dim) / Replicate() placements) under torchrun; translate for one device "
        "first",
    "tensorflow.distribute.OneDeviceStrategy":
        "all computation on one device: in torch move the model (model.to(device)) and each batch (x.to(device)) "
        "to torch.device(\"cuda:0\") or \"cpu\", and drop the `with strategy.scope():`",
    "tensorflow.config.LogicalDeviceConfiguration":
        "splitting a GPU into logical devices or capping its memory: torch has no logical devices; cap the memory "
        "of this process with torch.cuda.set_per_process_memory_fraction(fraction, device)",
    "tensorflow.config.set_logical_device_configuration":
        "splitting a GPU into logical devices or capping its memory, left here because the file counts TensorFlow's "
        "logical devices (list_logical_devices, a MirroredStrategy over all GPUs, DTensor's meshes), which it "
        "changes: torch has no logical devices, one per GPU; cap the memory "
        "of this process with torch.cuda.set_per_process_memory_fraction(fraction, device)",
    "tensorflow.config.experimental.VirtualDeviceConfiguration":
        "splitting a GPU into logical devices or capping its memory (TensorFlow 2.0's name): torch has no logical "
        "devices; cap the memory of this process with torch.cuda.set_per_process_memory_fraction(fraction, device)",
    "tensorflow.config.experimental.set_virtual_device_configuration":
        "splitting a GPU into logical devices or capping its memory (TensorFlow 2.0's name), left here because the "
        "file counts TensorFlow's logical devices (list_logical_devices, a MirroredStrategy over all GPUs): torch has "
        "no logical devices, one per GPU; cap the memory of this process with "
        "torch.cuda.set_per_process_memory_fraction(fraction, device)",
    "tensorflow.config.set_visible_devices":
        "the devices TensorFlow may use, left here because the file counts TensorFlow's logical devices "
        "(list_logical_devices, a MirroredStrategy over all GPUs), which it changes: torch computes where the code "
        "puts its tensors; hide GPUs from torch with CUDA_VISIBLE_DEVICES set before the program starts, and count "
        "the visible ones with torch.cuda.device_count()",
    "tensorflow.random.Generator":
        "a random number generator object with its own state: torch's is torch.Generator().manual_seed(seed), "
        "given to each draw as generator=: g.normal(shape, mean, stddev) → torch.normal(mean, stddev, shape, "
        "generator=g) (torch.randn(shape, generator=g) for 0, 1), g.uniform(shape, minval, maxval) → minval + "
        "(maxval - minval) * torch.rand(shape, generator=g), g.uniform(..., dtype=tf.int32) → torch.randint(minval, "
        "maxval, shape, generator=g, dtype=torch.int32); the values differ from TensorFlow's (another algorithm). "
        "fwport writes this where a name bound to Generator.from_seed(seed) (from_non_deterministic_state(), "
        "tf.random.get_global_generator()) is used only by its normal / uniform draws, make_seeds and "
        "reset_from_seed in the scope that binds it; not here",
    "tensorflow.random.get_global_generator":
        "TensorFlow's global tf.random.Generator, seeded from the operating system on first use (tf.random.set_seed "
        "does not seed it): in torch one torch.Generator().manual_seed(secrets.randbits(63)) kept for the program, "
        "given to each draw as generator=; fwport writes this (a global_generator helper) where a name bound to "
        "the call is used only by its normal / uniform draws in the scope that binds it; not here",
    "tensorflow.lite":
        "TensorFlow Lite (LiteRT) converts a model to a .tflite file and runs it on mobile and edge devices: a "
        "torch model is exported with torch.export.export(model, (example_input,)) and lowered for ExecuTorch "
        "(executorch.exir.to_edge(...).to_executorch(), a .pte file), or with torch.onnx.export for ONNX "
        "Runtime; the interpreter's set_tensor / invoke / get_tensor are then one call of the exported "
        "program; quantization is torch.ao.quantization. A .tflite file cannot be read by torch",
    # pretrained models: another framework's weights, architectures and preprocessing
    "keras.applications":
        "a pretrained Keras model (or its preprocess_input / decode_predictions): PyTorch's counterparts are "
        "torchvision.models (resnet50, vgg16/vgg19, mobilenet_v2, densenet121, inception_v3, efficientnet_b0 ..., "
        "with weights=\"DEFAULT\") and timm (xception, resnetv2_50 ...). They are other trainings of the same "
        "architectures, not these weights: expect other outputs, and fine-tune again. include_top=False is the "
        "model without its classifier (vgg.features, densenet.features, nn.Sequential(*list(resnet.children())"
        "[:-2])), pooling=\"avg\" adds nn.AdaptiveAvgPool2d(1) + nn.Flatten(); images are channels-first "
        "(N, 3, H, W). Keras's preprocess_input is model-specific (caffe BGR mean subtraction for ResNet50/VGG, "
        "[-1, 1] for MobileNet/Inception/Xception, none for EfficientNet; fwport translates a call of it, "
        "imagenet_preprocess(x, mode), not a reference to it): the torchvision weights expect their own "
        "weights.transforms() (RGB in [0, 1], ImageNet mean/std) instead; decode_predictions is "
        "weights.meta[\"categories\"][index]",
    "tensorflow.io.decode_csv":
        "CSV fields parsed from string tensors: parse the lines in Python (csv.reader) or read the file with "
        "pandas.read_csv, then torch.as_tensor the columns",
    # libraries built on TensorFlow / Keras (SOURCE_MODULES): they need TensorFlow where they are used
    "tensorflow_addons":
        "TensorFlow Addons (archived; it runs on TensorFlow): write its PyTorch counterpart by hand, e.g. "
        "tfa.optimizers.AdamW → torch.optim.AdamW(params, lr=lr, weight_decay=wd / lr, eps=1e-7) (tfa's decay is "
        "not multiplied by the learning rate, torch's is), tfa.layers.GELU → nn.GELU(approximate=\"tanh\") "
        "(tfa's default is the tanh approximation), tfa.layers.InstanceNormalization → nn.InstanceNorm2d(c, "
        "affine=True, eps=1e-3) on channels-first maps",
    "tensorflow_hub":
        "a TF Hub model is a SavedModel (TensorFlow graph and weights): its PyTorch counterpart is a model of "
        "torchvision.models, timm or Hugging Face transformers with other weights (expect other outputs, and "
        "fine-tune again)",
    "tensorflow_datasets":
        "TensorFlow Datasets yields tf.data pipelines: load the data with torchvision.datasets or Hugging Face "
        "`datasets` (datasets.load_dataset(name), many TFDS names exist there too) and batch it with a "
        "torch.utils.data.DataLoader; or export it once to NumPy files (tfds.as_numpy, with TensorFlow) that a "
        "Dataset reads",
    "tensorflow_probability":
        "TensorFlow Probability: torch.distributions has the common distributions (Normal, Categorical, "
        "Bernoulli, MultivariateNormal, ... check each parameterisation: scale vs variance, logits vs probs) and "
        "bijectors as torch.distributions.transforms; Pyro / NumPyro for the rest",
    "tensorflow_text":
        "text ops on string tensors: torch has no string tensors: tokenise in Python (Hugging Face tokenizers, "
        "sentencepiece) in the Dataset's __getitem__ or a collate_fn",
    "tensorflow_io":
        "file formats read into TensorFlow tensors: read them in the Dataset with a Python library (soundfile / "
        "torchaudio for audio, PIL for images, pyarrow for Parquet) and torch.as_tensor the result",
    "tensorflow_model_optimization":
        "pruning and quantization of Keras models: torch.nn.utils.prune and torch.ao.quantization",
    "tensorflow_lite_support": "TensorFlow Lite deployment: export the PyTorch model with torch.export (ExecuTorch "
                               "for mobile) or ONNX",
    "tensorflow_serving": "serving TensorFlow SavedModels: serve the PyTorch model with TorchServe, or export it "
                          "with torch.export / ONNX",
    "tensorflow_decision_forests": "decision forests are not neural networks: the `ydf` package trains the same "
                                   "models without TensorFlow (or scikit-learn's ensembles)",
    "tf_agents": "reinforcement learning on TensorFlow: write the agent in PyTorch (TorchRL, Stable-Baselines3)",
    "keras_cv": "a KerasCV model, layer or augmentation: PyTorch's counterparts are torchvision.models / timm "
                "and torchvision.transforms.v2 (other weights: fine-tune again)",
    "keras_nlp": "a KerasNLP model, layer or tokenizer: PyTorch's counterparts are Hugging Face transformers and "
                 "tokenizers (other weights: fine-tune again)",
    "keras_hub": "a KerasHub model, layer or tokenizer: PyTorch's counterparts are torchvision / timm / Hugging "
                 "Face transformers and tokenizers (other weights: fine-tune again)",
}

# tf.strings: torch has no string tensors. Text is prepared in Python (a Dataset's __getitem__, a collate_fn
# or a tokenizer) and only the ids reach torch; each op's Python counterpart, on str (decode bytes first)
_STRINGS = ("torch has no string tensors: prepare text in Python in the Dataset (its __getitem__ or a collate_fn) "
            "and give torch only the encoded ids; on a Python str (bytes.decode() first) the counterpart is ")
GUIDANCE.update({f"tensorflow.strings.{name}": _STRINGS + what for name, what in {
    "lower": "s.lower()",
    "upper": "s.upper()",
    "strip": "s.strip()",
    "length": "len(s) (unit='UTF8_CHAR'; len(s.encode()) for TensorFlow's default bytes)",
    "join": "sep.join([a, b, ...]) element by element",
    "reduce_join": "sep.join(parts) along the axis",
    "regex_replace": "re.sub(pattern, rewrite, s) (TensorFlow's RE2 syntax: \\1 groups as in Python; "
                     "replace_global=False is count=1)",
    "regex_full_match": "re.fullmatch(pattern, s) is not None",
    "split": "s.split(sep) (sep=None: runs of whitespace, as TensorFlow's default)",
    "unicode_split": "list(s) (characters; list(s.encode()) for bytes)",
    "to_number": "float(s) (int(s) for out_type=tf.int32/int64)",
    "substr": "s[pos:pos + len] (on bytes: TensorFlow's default unit='BYTE')",
    "as_string": "str(x) (format with f-strings for precision / width)",
    "format": "template.format(...) / an f-string",
    "unicode_decode": "[ord(c) for c in s] (the code points; bytes decoded first with b.decode(input_encoding))",
    "to_hash_bucket_fast": "a stable hash of your choice modulo the bucket count (zlib.crc32(s.encode()) % n): "
                           "TensorFlow's buckets come from its FarmHash Fingerprint64, so the ids differ",
}.items()})

# TF 1's recurrent layers (tf.compat.v1.keras.layers.LSTM / GRU, their cells): other defaults than Keras 2's
_V1_RECURRENT = ("TensorFlow 1's {name} gates with recurrent_activation='hard_sigmoid' by default{more} (Keras 2's "
                 "keras.layers.{name} uses 'sigmoid'{more2}), which torch's nn.{name} cannot compute: write "
                 "the cell by hand with clamp(0.2 * x + 0.5, 0, 1) as its gate activation, or, where retraining is "
                 "fine, port it as keras.layers.{name} (sigmoid gates) and translate that")
GUIDANCE.update({f"tensorflow.compat.v1.keras.layers.{name}": _V1_RECURRENT.format(
    name=name,
    more=", and with reset_after=False" if name.startswith("GRU") else "",
    more2=", reset_after=True" if name.startswith("GRU") else "") for name in ("LSTM", "LSTMCell", "GRU", "GRUCell")})
