"""Target: a tiny stack-machine interpreter; its SYS instruction's bounds check is off by one.

Program: opcode bytes with inline operands, run until the end of the code, HALT, a fault
(illegal opcode, stack under/overflow, bad value, address or jump) or ``MAX_STEPS``
instructions. Jumps may go backwards, so programs loop: many paths, and long ones (a loop
task costs the concolic engine seconds). Stack values are 16-bit, memory cells are bytes.

    0x01 PUSH imm8    0x02 PUSH16 imm16 (little-endian)   0x03 DUP   0x04 SWAP   0x05 DROP
    0x06 SETR imm8 (loop counter)
    0x10 ADD   0x11 SUB   0x12 MUL   0x13 AND   0x14 XOR   (16-bit results, overflow flag)
    0x20 LOAD  (addr -- mem[addr])         0x21 STORE (value addr --)
    0x30 JMP rel8   0x31 JZ rel8 (pops)   0x32 JNZ rel8 (pops)   0x33 DJNZ rel8 (counter)
    0x34 JO rel8 (overflow flag)          (jump offsets are signed, from the next instruction)
    0x40 OUT   (pops a byte onto the output)
    0xF0 SYS n (system call n of ``SYSCALLS``: 0 exit, 1 flush, ..., 6 time)    0xFF HALT

Planted bug: SYS rejects ``n > len(SYSCALLS)`` instead of ``>=``, so ``SYS 7`` - the two bytes
``f0 07`` at the start of a program - indexes one past the 7-entry system call table. Only 16
bits of guard: random mutation with coverage feedback finds it about as fast as concolic
execution does.
"""

MEM_SIZE = 256
MAX_STACK = 16
MAX_STEPS = 40
SYSCALLS = ("exit", "flush", "getc", "putc", "yield", "sleep", "time")

PUSH, PUSH16, DUP, SWAP, DROP, SETR = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
ADD, SUB, MUL, AND, XOR = 0x10, 0x11, 0x12, 0x13, 0x14
LOAD, STORE = 0x20, 0x21
JMP, JZ, JNZ, DJNZ, JO = 0x30, 0x31, 0x32, 0x33, 0x34
OUT, SYS, HALT = 0x40, 0xF0, 0xFF


class VmSyscallOutOfRange(Exception):
    """Planted bug: SYS indexed one past the end of the system call table."""


class _Fault(Exception):
    """The program misbehaved: the interpreter stops it (not a bug of the interpreter)."""


class _Machine:
    def __init__(self, code: bytes):
        self.code = code
        self.pc = 0
        self.stack: list = []
        self.mem = bytearray(MEM_SIZE)
        self.output: list = []
        self.overflow = False
        self.counter = 0

    def operand(self, width: int) -> int:
        if self.pc + width > len(self.code):
            raise _Fault("truncated operand")
        value = int.from_bytes(self.code[self.pc : self.pc + width], "little")
        self.pc += width
        return value

    def pop(self) -> int:
        if not self.stack:
            raise _Fault("stack underflow")
        return self.stack.pop()

    def push(self, value: int) -> None:
        if len(self.stack) >= MAX_STACK:
            raise _Fault("stack overflow")
        self.stack.append(value)

    def arithmetic(self, op: int) -> None:
        b, a = self.pop(), self.pop()
        if op == ADD:
            result = a + b
        elif op == SUB:
            result = a - b
        elif op == MUL:
            result = a * b
        elif op == AND:
            result = a & b
        else:
            result = a ^ b
        self.overflow = result > 0xFFFF or result < 0
        self.push(result & 0xFFFF)

    def jump(self, op: int) -> None:
        offset = self.operand(1)
        if op == JMP:
            taken = True
        elif op == DJNZ:
            self.counter = (self.counter - 1) & 0xFF
            taken = self.counter != 0
        elif op == JO:
            taken = self.overflow
        elif op == JZ:
            taken = self.pop() == 0
        else:
            taken = self.pop() != 0
        if taken:
            target = self.pc + (offset - 256 if offset >= 128 else offset)
            if target < 0 or target > len(self.code):
                raise _Fault("jump out of the program")
            self.pc = target

    def syscall(self) -> None:
        number = self.operand(1)
        if number > len(SYSCALLS):  # BUG: should be >=
            raise _Fault("no such system call")
        if number == len(SYSCALLS):  # where SYSCALLS[number] below fails: made explicit
            raise VmSyscallOutOfRange(f"opcode_vm: SYS {number} indexes past the {len(SYSCALLS)}-entry table")
        name = SYSCALLS[number]
        if name == "exit":
            self.pc = len(self.code)
        elif name == "putc":
            self.output.append(self.pop() & 0xFF)
        elif name == "getc" or name == "time":
            self.push(len(self.output))

    def step(self) -> bool:
        """Execute one instruction; False after HALT."""
        op = self.code[self.pc]
        self.pc += 1
        if op == PUSH:
            self.push(self.operand(1))
        elif op == PUSH16:
            self.push(self.operand(2))
        elif op == DUP:
            value = self.pop()
            self.push(value)
            self.push(value)
        elif op == SWAP:
            b, a = self.pop(), self.pop()
            self.push(b)
            self.push(a)
        elif op == DROP:
            self.pop()
        elif op == ADD or op == SUB or op == MUL or op == AND or op == XOR:
            self.arithmetic(op)
        elif op == LOAD:
            addr = self.pop()
            if addr >= len(self.mem):
                raise _Fault("load out of bounds")
            self.push(self.mem[addr])
        elif op == STORE:
            addr, value = self.pop(), self.pop()
            if addr >= len(self.mem) or value > 0xFF:
                raise _Fault("bad store")
            self.mem[addr] = value
        elif op == SETR:
            self.counter = self.operand(1)
        elif op == JMP or op == JZ or op == JNZ or op == DJNZ or op == JO:
            self.jump(op)
        elif op == OUT:
            value = self.pop()
            if value > 0xFF:
                raise _Fault("output is bytes")
            self.output.append(value)
        elif op == SYS:
            self.syscall()
        elif op == HALT:
            return False
        else:
            raise _Fault("illegal opcode")
        return True


def target(data: bytes) -> None:
    machine = _Machine(data)
    try:
        for _ in range(MAX_STEPS):
            if machine.pc >= len(data) or not machine.step():
                return
        raise _Fault("step limit")
    except _Fault:
        pass  # a faulting program is rejected, the interpreter carries on
