#!/usr/bin/env python3
"""Lists the functions in src/ longer than a limit (issue 16: no function over about 100 lines).

A plain text scan, no compiler: a function is a top-level (column 0) signature line whose body opens with
'{' and ends at the matching '}'; string and character literals and comments are blanked first, so braces
inside them do not count. Lambdas and member functions defined inside a class count towards their enclosing
function or class, not on their own.
    /usr/bin/python3 tools/function_lengths.py [LIMIT] [--check] [--files MAX_LINES]
--check exits 1 when any function is over LIMIT (default 100); ctest Layout.NoFunctionOverLimit runs it.
--files MAX_LINES lists (and with --check fails on) the source files of src/ over MAX_LINES lines instead
(issue 25: no file over about 700 lines); ctest Layout.NoFileOverLimit runs it.
--folders MAX_FILES lists (and with --check fails on) the folders of src/ holding more than MAX_FILES source
files of their own, subfolders not counted (issue 42: no folder over 32); ctest Layout.NoFolderOverLimit runs it.
"""
import glob
import os
import re
import sys


def blank_literals(text):
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
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = ')' + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(' ' * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return ''.join(out)


def long_functions(root, limit):
    found = []
    for path in sorted(glob.glob(os.path.join(root, 'src', '**', '*.[ch]pp'), recursive=True)):
        lines = blank_literals(open(path, encoding='utf-8').read()).split('\n')
        i = 0
        while i < len(lines):
            line = lines[i]
            starts = re.match(r'^[A-Za-z_].*[)(,]\s*(const)?\s*(noexcept)?\s*(->.*)?\{?\s*$', line) and \
                not re.match(r'^(namespace|struct|class|enum|union|extern|using|typedef|template)\b', line)
            if not starts:
                i += 1
                continue
            j = i
            while j < len(lines) and '{' not in lines[j] and ';' not in lines[j]:
                j += 1
            if j >= len(lines) or ';' in lines[j].split('{')[0]:
                i = j + 1
                continue
            depth, k = 0, j
            while k < len(lines):
                depth += lines[k].count('{') - lines[k].count('}')
                if depth <= 0:
                    break
                k += 1
            length = k - i + 1
            if length > limit:
                found.append((length, os.path.relpath(path, root), i + 1, line.strip()[:90]))
            i = k + 1
    return found


def long_files(root, limit):
    found = []
    for path in sorted(glob.glob(os.path.join(root, 'src', '**', '*.[ch]pp'), recursive=True)):
        n = open(path, encoding='utf-8').read().count('\n')
        if n > limit:
            found.append((n, os.path.relpath(path, root)))
    return found


def full_folders(root, limit):
    """(count, folder) of each folder of root/src with more than `limit` .cpp/.hpp/.h files of its own."""
    out = []
    for folder, _, names in os.walk(os.path.join(root, 'src')):
        n = sum(1 for f in names if f.endswith(('.cpp', '.hpp', '.h')))
        if n > limit:
            out.append((n, os.path.relpath(folder, root)))
    return sorted(out, reverse=True)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for flag, find, unit in (('--folders', full_folders, 'source files'), ('--files', long_files, 'lines')):
        if flag in sys.argv:
            limit = int(sys.argv[sys.argv.index(flag) + 1])
            found = find(root, limit)
            for n, path in found:
                print(f'{n:5d} {unit}  {path}')
            print(f'{len(found)} {"folder" if flag == "--folders" else "file"}(s) over {limit} {unit}')
            sys.exit(1 if '--check' in sys.argv and found else 0)
    args = [a for a in sys.argv[1:] if a != '--check']
    limit = int(args[0]) if args else 100
    found = long_functions(root, limit)
    for length, path, line, sig in found:
        print(f'{length:5d} lines  {path}:{line}  {sig}')
    print(f'{len(found)} function(s) over {limit} lines')
    if '--check' in sys.argv and found:
        sys.exit(1)


if __name__ == '__main__':
    main()
