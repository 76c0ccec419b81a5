#!/usr/bin/env python3
"""Renders chat templates with transformers' apply_chat_template and writes the goldens tandem's C++
renderer (coordinator/chat_template.h) must reproduce byte for byte: tests/fixtures/chat/goldens.json.

Templates: the shipped pylm's (models/pylm/tokenizer_config.json), Qwen3's as Qwen/Qwen3-8B ships it
(tests/fixtures/chat/qwen3/tokenizer_config.json), and small templates that exercise each construct of the
supported Jinja2 subset (whitespace control, loops, filters, tests, slices, namespace, ternaries).
Each case records the whole context the template saw (messages, add_generation_prompt, tools=None,
documents=None, the tokenizer's special tokens, extra kwargs such as enable_thinking), so the C++ test
renders exactly the same variables. Run on a machine with transformers (the GPU machine):
    python3 tools/make_chat_template_fixture.py
Without transformers, `--jinja2` renders with Jinja2 set up as transformers sets it up
(chat_template_utils._compile_jinja_template: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, HF's tojson and raise_exception); the file records which renderer made it."""
import argparse
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FEATURES = {
    # Whitespace control: trim_blocks, lstrip_blocks, "-" on every delimiter, "+" keeping a newline, comments.
    "whitespace": (
        "  {% for m in messages %}\n"
        "  [{{ m.role }}]\n"
        "    {%- if m.content %} {{ m.content -}} {% endif %}\n"
        "  {# a comment #}\n"
        "{%+ if loop.last +%}\n"
        "last{% endif %}\n"
        "{% endfor %}\n"
        "{{- '|' -}}\n   x  {#- trimmed -#}  y\n"
        "{% if add_generation_prompt %}<gen>{% endif %}\n"
    ),
    # Expressions: arithmetic and precedence, comparisons, in, ~, ternaries, literals, slices, indexing.
    "expressions": (
        "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} "
        "{{ 7 / 2 }} {{ 1 - -1 }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'x' * 3 }}\n"
        "{{ messages|length - 1 }} {{ messages[-1].role }} {{ messages[0]['content'][:5] }} "
        "{{ messages[0].content[::-1][:3] }} {{ messages[0].content[2:-2:2] }}\n"
        "{{ 'yes' if 'a' in 'cat' else 'no' }} {{ 'yes' if 'z' not in ['a', 'b'] else 'no' }} "
        "{{ 'k' in {'k': 1} }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'b' > 'a' }} {{ 2 >= 3 }} {{ none == none }}\n"
        "{{ not true or false and true }} {{ (1 and 'x') }} {{ (0 or 'y') }} {{ '' or 'empty' }} {{ 1.5 }} {{ 3.0 }}\n"
        "{{ 'adjacent' 'literals' }} {{ \"dq\\t\\\"s\\\"\" }} {{ 'esc\\\\\\n' }} {{ 'x' if false }}|\n"
    ),
    # Filters and tests.
    "filters": (
        "{{ messages|length }} {{ (messages|first).role }} {{ (messages|last).role }} {{ '  t  '|trim }}|"
        "{{ 'ABC'|lower }} {{ 'abc'|upper }} {{ ['a', 'b', 'c']|join('-') }} {{ undefined_x|default('dflt') }} "
        "{{ ''|default('e', true) }} {{ 12|string }} {{ 'abc'|list|join(',') }} {{ [1, 2, 3]|reverse|join }} "
        "{{ 'aXbX'|replace('X', 'y') }} {{ '42'|int + 1 }} {{ 'q'|int(7) }} {{ {'a': 1, 'b': [1, 'x', none]}|tojson }} "
        "{{ {'a': {'b': 2}}|tojson(indent=2) }} {{ 'é\"\\n'|tojson }}\n"
        "{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} "
        "{{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ {} is mapping }} {{ [] is iterable }} "
        "{{ 'a' is sequence }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} "
        "{{ 4 is even }} {{ 3 is odd }} {{ 3 is not even }} {{ 'a' is equalto 'a' }} {{ 9 is divisibleby 3 }} "
        "{{ 'a' is eq('b') }} {{ 2 is ne(3) }}\n"
    ),
    # Statements: namespace across loops, set scoping, loop variables, for-if, for-else, break, continue,
    # unpacking, dict iteration, methods.
    "statements": (
        "{%- set ns = namespace(n=0, seen='') %}{% set outer = 'o' %}"
        "{%- for m in messages %}{% set outer = m.role %}{% set ns.n = ns.n + 1 %}"
        "{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}"
        "{{ '^' if loop.first }}{{ '$' if loop.last }}{{ loop.previtem.role if loop.previtem is defined }};"
        "{% endfor %}{{ outer }} {{ ns.n }}\n"
        "{%- for m in messages if m.role == 'user' %}<{{ m.content.split(' ')[0] }}>{% else %}none{% endfor %}"
        "{%- for x in [] %}x{% else %} empty{% endfor %}"
        "{%- for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}"
        "{% endfor %}"
        "{%- for k, v in {'a': 1, 'b': 2}.items() %} {{ k }}={{ v }}{% endfor %}"
        "{%- for k in {'p': 1, 'q': 2} %} {{ k }}{% endfor %}"
        "{%- for a, b in [[1, 2], [3, 4]] %} {{ a + b }}{% endfor %}\n"
        "{{ '  x y  '.strip() }}|{{ '--x--'.strip('-') }}|{{ '--x--'.lstrip('-') }}|{{ '--x--'.rstrip('-') }}|"
        "{{ 'a,b,,c'.split(',')|length }}|{{ ' a  b '.split()|join('+') }}|{{ 'a-b-c'.split('-', 1)[1] }}|"
        "{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'Ab'.lower() }}{{ 'Ab'.upper() }}|"
        "{{ 'aaa'.replace('a', 'b', 2) }}|{{ {'k': 'v'}.get('k') }}{{ {'k': 'v'}.get('z', 'd') }}|"
        "{{ {'k': 'v'}.keys()|join }}{{ {'k': 'v'}.values()|join }}\n"
        "{%- if add_generation_prompt %}{% generation %}GEN{% endgeneration %}{% endif %}"
    ),
    # A conversation layout in the style of Llama/Mistral templates: bos_token, role checks, raise_exception.
    "alternating": (
        "{{- bos_token if bos_token is defined else '' }}"
        "{%- for message in messages %}"
        "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
        "{%- endif %}"
        "{%- if message['role'] == 'user' %}{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}"
        "{%- else %}{{ ' ' + message['content'] | trim + eos_token }}{% endif %}"
        "{%- endfor %}"
    ),
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Write a function."}, {"role": "assistant", "content": "def f():\n    return 1\n"},
     {"role": "user", "content": "Now in one line, please."}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
     {"role": "assistant", "content": "<think>\nplanning\n</think>\n\nanswer one"},
     {"role": "user", "content": "q2"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\nlast thoughts\n</think>\n\nfinal"}],
    [{"role": "user", "content": "  spaces and\ttabs\n\nand blank lines  "},
     {"role": "assistant", "content": "\n\nleading newlines"}],
    [{"role": "user", "content": "unicode: café 東京 😀 \u00a0nbsp"}],
    [{"role": "user", "content": "<tool_response>looks like a tool</tool_response>"},
     {"role": "user", "content": "a real question"}],
]

REFUSED_CONVERSATIONS = [  # for the "alternating" template only: two user turns in a row
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
]


def hf_tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def jinja2_renderer():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(jinja2.ext.Extension):  # {% generation %} renders its body, as in transformers
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = hf_tojson
    env.globals["raise_exception"] = raise_exception

    def render(source, context):
        return env.from_string(source).render(**context)

    return render, f"jinja2 {jinja2.__version__} in transformers' chat template environment"


def transformers_renderer():
    import transformers
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "models", "pylm"))

    def render(source, context):
        ctx = dict(context)
        messages = ctx.pop("messages")
        gen = ctx.pop("add_generation_prompt")
        for k in ("tools", "documents"):
            ctx.pop(k)
        for k in list(ctx):
            if k in tok.special_tokens_map:
                ctx.pop(k)  # apply_chat_template passes the tokenizer's own
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen, chat_template=source,
                                       **ctx)

    return render, f"transformers {transformers.__version__} apply_chat_template", tok.special_tokens_map


def special_tokens(config):
    """What transformers' special_tokens_map holds for this tokenizer_config.json: the set ones."""
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        v = config.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[k] = v
    if config.get("additional_special_tokens"):
        out["additional_special_tokens"] = list(config["additional_special_tokens"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jinja2", action="store_true", help="render with Jinja2 in HF's environment")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "chat", "goldens.json"))
    args = ap.parse_args()

    pylm = json.load(open(os.path.join(ROOT, "models", "pylm", "tokenizer_config.json")))
    qwen3 = json.load(open(os.path.join(ROOT, "tests", "fixtures", "chat", "qwen3", "tokenizer_config.json")))
    specials = special_tokens(pylm)
    if args.jinja2:
        render, renderer = jinja2_renderer()
    else:
        render, renderer, hf_specials = transformers_renderer()
        specials = {k: v for k, v in hf_specials.items()}
    templates = {"pylm": pylm["chat_template"], "qwen3": qwen3["chat_template"], **FEATURES}

    cases = []
    for name, source in templates.items():
        for i, messages in enumerate(CONVERSATIONS):
            for gen in (True, False):
                if not gen and i % 3 != 0:
                    continue
                kwargs_options = [{}]
                if name == "qwen3":
                    kwargs_options = [{}, {"enable_thinking": False}, {"enable_thinking": True}]
                for kwargs in kwargs_options:
                    context = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": gen,
                               **specials, **kwargs}
                    try:
                        rendered = render(source, context)
                        cases.append({"template": name, "context": context, "rendered": rendered})
                    except Exception as e:  # noqa: BLE001 - recorded as what the template refuses
                        cases.append({"template": name, "context": context, "error": str(e)})
        if name == "alternating":
            for messages in REFUSED_CONVERSATIONS:
                context = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": True,
                           **specials}
                try:
                    cases.append({"template": name, "context": context, "rendered": render(source, context)})
                except Exception as e:  # noqa: BLE001
                    cases.append({"template": name, "context": context, "error": str(e)})

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"renderer": renderer, "templates": templates, "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out} ({renderer})")


if __name__ == "__main__":
    main()
