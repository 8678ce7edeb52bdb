#!/usr/bin/python3
"""Lists C++ functions over MAX_FN lines and files over MAX_FILE lines under src/ (issue 25's limits).

Usage: tools/check_sizes.py [--max-fn 100] [--max-file 700] FILE...   Exit 1 when something is over.
A function is a brace block opened at nesting depth 0 (or inside namespaces only) whose header has a ')' -
the definition's lines counted from its header's first line to its closing brace. Strings, character
literals and comments are skipped when counting braces."""
import re
import sys


def strip_code(text):
    """The text with comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j + 1])); i = j + 1
        elif c == '#' and (i == 0 or text[i - 1] == '\n'):
            j = i
            while True:  # a preprocessor line, with its continuations
                k = text.find('\n', j)
                k = n if k < 0 else k
                if k > 0 and text[k - 1] == '\\' and k < n:
                    j = k + 1
                    continue
                break
            out.append(re.sub(r'[^\n]', ' ', text[i:k])); i = k
        else:
            out.append(c); i += 1
    return ''.join(out)


def long_functions(path, max_fn):
    code = strip_code(open(path, encoding='utf-8').read())
    found, stack, header_start = [], [], 0
    # stack entries: (kind, start_line)  kind in {'ns', 'fn', 'other'}
    line = 1
    last_stmt_end = 0  # offset after the last ';', '{' or '}' at namespace level
    for i, c in enumerate(code):
        if c == '\n':
            line += 1
        elif c == '{':
            if all(k in ('ns', 'other') for k, _ in stack):
                header = code[last_stmt_end:i]
                hs = header.strip()
                start = line - hs.count('\n')
                if re.match(r'^(namespace\b|extern\s+"C")', hs) or hs.startswith('namespace') or hs == '':
                    stack.append(('ns', line))
                elif ')' in hs and not re.match(r'^(struct|class|enum|union)\b', hs) and not hs.rstrip().endswith('='):
                    stack.append(('fn', start))
                else:
                    stack.append(('other', start))
            else:
                stack.append(('inner', line))
            last_stmt_end = i + 1
        elif c == '}':
            kind, start = stack.pop() if stack else ('other', line)
            if kind == 'fn' and line - start + 1 > max_fn:
                found.append((start, line - start + 1))
            if all(k in ('ns', 'other') for k, _ in stack):
                last_stmt_end = i + 1
        elif c == ';' and all(k in ('ns', 'other') for k, _ in stack):
            last_stmt_end = i + 1
    return found


def main(argv):
    max_fn, max_file, files = 100, 700, []
    it = iter(argv)
    for a in it:
        if a == '--max-fn':
            max_fn = int(next(it))
        elif a == '--max-file':
            max_file = int(next(it))
        else:
            files.append(a)
    bad = 0
    for f in files:
        n = open(f, encoding='utf-8').read().count('\n')
        if n > max_file:
            print(f'{f}: {n} lines (limit {max_file})'); bad += 1
        for start, length in long_functions(f, max_fn):
            print(f'{f}:{start}: a function of {length} lines (limit {max_fn})'); bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
